#include "jail.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "mutant.h"

namespace smolbox::vm {
namespace {

// What the jailed child sends back when a step before execve fails.
struct StepFailure {
  char step[48];
  int err;
};

[[noreturn]] void FailStep(int error_fd, const char* step) {
  StepFailure failure{};
  failure.err = errno;
  strncpy(failure.step, step, sizeof failure.step - 1);
  [[maybe_unused]] ssize_t n = write(error_fd, &failure, sizeof failure);
  _exit(125);
}

void DropCapabilities() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  syscall(SYS_capset, &header, data);
}

// Its uid and what it may still do in its namespaces. With the jail off (mutant.h) QEMU runs as
// the runtime does, in the host's namespaces, and only its cgroup and -sandbox hold it.
void EnterJail(const JailPlan& plan, int error_fd) {
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) FailStep(error_fd, "mount --make-rprivate /");
  // Uid 0 inside must not regain capabilities at execve.
  if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                                   SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED) != 0) {
    FailStep(error_fd, "prctl PR_SET_SECUREBITS");
  }
  for (int cap = 0; cap <= CAP_LAST_CAP; ++cap) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  if (setresgid(plan.inside_gid, plan.inside_gid, plan.inside_gid) != 0) FailStep(error_fd, "setresgid");
  if (setresuid(plan.inside_uid, plan.inside_uid, plan.inside_uid) != 0) FailStep(error_fd, "setresuid");
  DropCapabilities();
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) FailStep(error_fd, "clear ambient capabilities");
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) FailStep(error_fd, "prctl PR_SET_NO_NEW_PRIVS");
}

[[noreturn]] void RunChild(const JailPlan& plan, shared::CgroupEntry& cgroup, int joined_fd, int go_fd,
                           int error_fd) {
  // The runtime's death ends QEMU, and with it (PID 1 of its namespace) everything in it.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) FailStep(error_fd, "prctl PR_SET_PDEATHSIG");
  // While we are one thread; the runtime moves us itself where this failed.
  cgroup.JoinSelf();
  if (write(joined_fd, "j", 1) != 1) FailStep(error_fd, "report the cgroup joined");
  char go = 0;
  if (read(go_fd, &go, 1) != 1) FailStep(error_fd, "await id maps");
  if (SMOLBOX_PROTECTED("qemu_jail")) EnterJail(plan, error_fd);
  int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null < 0 || dup2(null, 0) < 0 || dup2(plan.console_fd, 1) < 0 || dup2(plan.console_fd, 2) < 0) {
    FailStep(error_fd, "wire QEMU's stdio");
  }
  for (int fd : plan.keep_fds) {
    if (fcntl(fd, F_SETFD, 0) != 0) FailStep(error_fd, "keep a descriptor for QEMU");
  }
  std::vector<char*> argv;
  for (const auto& arg : plan.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  char path[] = "PATH=/usr/bin:/bin";
  char* envp[] = {path, nullptr};
  execve(argv[0], argv.data(), envp);
  FailStep(error_fd, "execve QEMU");
}

// Nothing once the child has exec'd QEMU (the pipe closes), or the step that failed.
std::optional<Error> ReadStepFailure(int error_fd) {
  StepFailure failure{};
  ssize_t n;
  do {
    n = read(error_fd, &failure, sizeof failure);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof failure)) return std::nullopt;
  failure.step[sizeof failure.step - 1] = '\0';
  return Error{"qemu jail", failure.step, failure.err};
}

Expected<void> WriteProcFile(pid_t pid, const char* name, const std::string& text) {
  std::string path = fmt::format("/proc/{}/{}", pid, name);
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid() || write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return std::unexpected(Error::Sys("write " + path));
  }
  return {};
}

Expected<void> MapIds(pid_t pid, const JailPlan& plan) {
  SMOLBOX_TRY(WriteProcFile(pid, "uid_map", fmt::format("{} {} 1\n", plan.inside_uid, plan.host_uid)));
  SMOLBOX_TRY(WriteProcFile(pid, "setgroups", "deny"));
  return WriteProcFile(pid, "gid_map", fmt::format("{} {} 1\n", plan.inside_gid, plan.host_gid));
}

}  // namespace

Expected<JailedProcess> StartJailed(const JailPlan& plan, shared::Cgroup& cgroup) {
  int joined[2];
  int go[2];
  int error[2];
  if (pipe2(joined, O_CLOEXEC) != 0) return std::unexpected(Error::Sys("pipe2"));
  UniqueFd joined_read(joined[0]), joined_write(joined[1]);
  if (pipe2(go, O_CLOEXEC) != 0) return std::unexpected(Error::Sys("pipe2"));
  UniqueFd go_read(go[0]), go_write(go[1]);
  if (pipe2(error, O_CLOEXEC) != 0) return std::unexpected(Error::Sys("pipe2"));
  UniqueFd error_read(error[0]), error_write(error[1]);
  shared::CgroupEntry entry = cgroup.OpenEntry();
  int pidfd = -1;
  const bool jail = SMOLBOX_PROTECTED("qemu_jail");
  unsigned long namespaces = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS;
  unsigned long flags = (jail ? namespaces : 0) | CLONE_PIDFD | SIGCHLD;
  long pid = entry.Clone(flags, &pidfd);
  if (pid < 0) return std::unexpected(Error::Sys("clone QEMU's namespaces"));
  if (pid == 0) RunChild(plan, entry, joined_write.get(), go_read.get(), error_write.get());
  JailedProcess jailed{static_cast<pid_t>(pid), UniqueFd(pidfd)};
  entry = {};
  joined_write.Reset();
  error_write.Reset();
  go_read.Reset();
  auto abandon = [&](Error e) -> Expected<JailedProcess> {
    syscall(SYS_pidfd_send_signal, jailed.pidfd.get(), SIGKILL, nullptr, 0);
    while (waitpid(jailed.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return std::unexpected(std::move(e));
  };
  // While the child joins its cgroups.
  if (jail) {
    if (auto ok = MapIds(jailed.pid, plan); !ok) return abandon(ok.error());
  }
  char ack = 0;
  ssize_t n;
  do {
    n = read(joined_read.get(), &ack, 1);
  } while (n < 0 && errno == EINTR);
  if (n == 1) {
    if (auto ok = cgroup.EnsureHolds(jailed.pid); !ok) return abandon(ok.error());
    if (write(go_write.get(), "g", 1) != 1) return abandon(Error::Sys("start QEMU"));
  }
  if (auto failed = ReadStepFailure(error_read.get())) return abandon(*failed);
  if (n != 1) return abandon(Error{"qemu jail", "the jailed child died before it joined its cgroup", 0});
  return jailed;
}

}  // namespace smolbox::vm
