#include "launch/spawn.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <utility>

#include "program.h"

namespace smolvm_check {
namespace {

using smolbox::UniqueFd;

// ---------------------------------------------------------------------------------------------
// The child, between fork and exec. The runner has threads, so only async-signal-safe calls and
// no allocation: everything it needs is prepared by the parent.

enum class Step : int {
  kSetsid,
  kSignals,
  kRlimit,
  kSetns,
  kMountNamespace,
  kResolvConf,
  kDup2,
  kCloseRange,
  kFcntl,
  kChdir,
  kExecve
};

const char* StepName(Step step) {
  switch (step) {
    case Step::kSetsid:
      return "setsid";
    case Step::kSignals:
      return "reset signals";
    case Step::kRlimit:
      return "setrlimit RLIMIT_CORE";
    case Step::kSetns:
      return "setns into the launch's network namespace";
    case Step::kMountNamespace:
      return "a private mount namespace";
    case Step::kResolvConf:
      return "bind the launch's resolv.conf over /etc/resolv.conf";
    case Step::kDup2:
      return "dup2 stdio";
    case Step::kCloseRange:
      return "close_range";
    case Step::kFcntl:
      return "clear FD_CLOEXEC on an inherited fd";
    case Step::kChdir:
      return "chdir";
    case Step::kExecve:
      return "execve";
  }
  return "?";
}

struct Report {
  int step;
  int err;
};

struct ChildPlan {
  const char* path;
  char* const* argv;
  char* const* envp;
  const char* cwd;  // nullptr: stay
  int netns_fd;            // -1: stay
  const char* resolv_conf;  // nullptr: the host's
  int stdio[3];
  int sync_fd;
  int report_fd;
  const int* keep;  // sorted, above 2: the inherited fds and report_fd
  size_t keep_count;
  const int* inherit;
  size_t inherit_count;
};

[[noreturn]] void Fail(const ChildPlan& p, Step step) {
  Report report{static_cast<int>(step), errno};
  (void)!write(p.report_fd, &report, sizeof report);
  _exit(127);
}

bool CloseAllExcept(const ChildPlan& p) {
  unsigned low = 3;
  for (size_t i = 0; i < p.keep_count; ++i) {
    auto fd = static_cast<unsigned>(p.keep[i]);
    if (fd > low && close_range(low, fd - 1, 0) != 0) return false;
    low = fd + 1;
  }
  return close_range(low, ~0U, 0) == 0;
}

// A runner that ignores SIGPIPE, or blocks signals in its threads, must not pass that on.
bool ResetSignals() {
  sigset_t none;
  sigemptyset(&none);
  if (sigprocmask(SIG_SETMASK, &none, nullptr) != 0) return false;
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);  // EINVAL for glibc's own
  }
  return true;
}

[[noreturn]] void RunChild(const ChildPlan& p) {
  if (setsid() < 0) Fail(p, Step::kSetsid);
  // The parent moves us into the cgroup first: nothing of the launch runs outside the net.
  char go = 0;
  ssize_t n;
  while ((n = read(p.sync_fd, &go, 1)) < 0 && errno == EINTR) {
  }
  if (n != 1) _exit(127);
  if (!ResetSignals()) Fail(p, Step::kSignals);
  const rlimit no_core{0, 0};
  if (setrlimit(RLIMIT_CORE, &no_core) != 0) Fail(p, Step::kRlimit);
  if (p.netns_fd >= 0 && setns(p.netns_fd, CLONE_NEWNET) != 0) Fail(p, Step::kSetns);
  if (p.resolv_conf != nullptr) {
    // Private first, so that the bind never propagates back to the host's /etc.
    if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
      Fail(p, Step::kMountNamespace);
    if (mount(p.resolv_conf, "/etc/resolv.conf", nullptr, MS_BIND, nullptr) != 0)
      Fail(p, Step::kResolvConf);
  }
  for (int i = 0; i < 3; ++i) {
    if (dup2(p.stdio[i], i) < 0) Fail(p, Step::kDup2);
  }
  if (!CloseAllExcept(p)) Fail(p, Step::kCloseRange);
  for (size_t i = 0; i < p.inherit_count; ++i) {
    int flags = fcntl(p.inherit[i], F_GETFD);
    if (flags < 0 || fcntl(p.inherit[i], F_SETFD, flags & ~FD_CLOEXEC) != 0) Fail(p, Step::kFcntl);
  }
  if (p.cwd != nullptr && chdir(p.cwd) != 0) Fail(p, Step::kChdir);
  execve(p.path, p.argv, p.envp);
  Fail(p, Step::kExecve);
}

// ---------------------------------------------------------------------------------------------
// The parent.

// A close-on-exec pipe whose ends are above the stdio numbers, so that dup2 onto 0-2 never
// finds its own source there.
Expected<std::pair<UniqueFd, UniqueFd>> Pipe() {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return std::unexpected(Error::Sys("pipe2"));
  UniqueFd ends[2] = {UniqueFd(p[0]), UniqueFd(p[1])};
  for (auto& end : ends) {
    if (end.get() > 2) continue;
    int moved = fcntl(end.get(), F_DUPFD_CLOEXEC, 3);
    if (moved < 0) return std::unexpected(Error::Sys("fcntl F_DUPFD_CLOEXEC"));
    end.Reset(moved);
  }
  return std::pair{std::move(ends[0]), std::move(ends[1])};
}

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Read and write ends of the child's stdin, stdout and stderr, of the sync pipe that releases it
// and of the report pipe that a failing step comes back on.
enum PipeIndex { kStdin, kStdout, kStderr, kSync, kReport, kPipeCount };
using Pipes = std::array<std::pair<UniqueFd, UniqueFd>, kPipeCount>;

Expected<Pipes> MakePipes() {
  Pipes pipes;
  for (auto& p : pipes) {
    SMOLBOX_ASSIGN_OR_RETURN(auto made, Pipe());
    p = std::move(made);
  }
  return pipes;
}

// The fds the child keeps across close_range: the inherited ones and its report pipe, sorted.
std::vector<int> KeptFds(const Launch& launch, int report_fd) {
  std::vector<int> keep = launch.inherited_fds;
  keep.push_back(report_fd);
  std::sort(keep.begin(), keep.end());
  keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
  return keep;
}

// Nothing on the report pipe but its EOF, which close-on-exec gives, means the exec succeeded.
Expected<void> AwaitExec(int report_fd, const Launch& launch, const std::string& path) {
  Report report{};
  ssize_t n;
  while ((n = read(report_fd, &report, sizeof report)) < 0 && errno == EINTR) {
  }
  if (n != sizeof report) return {};
  auto step = static_cast<Step>(report.step);
  std::string where = fmt::format("launch: {}", StepName(step));
  if (step == Step::kExecve) where += " " + path;
  if (step == Step::kChdir) where += " " + launch.cwd;
  return std::unexpected(Error{where, "", report.err});
}

// The parent's half once the child waits on the sync pipe: hold it, release it, await its exec.
Expected<void> HoldAndRelease(pid_t pid, const std::function<Expected<void>(pid_t)>& hold,
                              Pipes& pipes, const Launch& launch, const std::string& path) {
  for (int i : {kStdin, kSync}) pipes[i].first.Reset();
  for (int i : {kStdout, kStderr, kReport}) pipes[i].second.Reset();
  SMOLBOX_TRY(hold(pid));
  if (write(pipes[kSync].second.get(), "g", 1) != 1) {
    return std::unexpected(Error::Sys("write sync pipe"));
  }
  pipes[kSync].second.Reset();
  return AwaitExec(pipes[kReport].first.get(), launch, path);
}

}  // namespace

Expected<std::string> ResolveProgram(const std::string& name, const std::vector<std::string>& env) {
  if (name.empty()) return std::unexpected(Error::Field("argv[0]", "is empty"));
  if (name.find('/') != std::string::npos) return name;
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const auto& e : env) {
    if (e.starts_with("PATH=")) path = e.substr(5);
  }
  std::string found = smolbox::FindOnPath(path, name, smolbox::EmptyPathEntry::kCurrentDir);
  if (!found.empty()) return found;
  return std::unexpected(
      Error::Field("argv[0]", fmt::format("'{}' is not on PATH {}", name, path)));
}

Expected<SpawnedChild> Spawn(const Launch& launch, const std::string& path,
                             const std::function<Expected<void>(pid_t)>& hold) {
  SMOLBOX_ASSIGN_OR_RETURN(Pipes pipes, MakePipes());
  UniqueFd netns;
  if (!launch.netns_path.empty()) {
    netns.Reset(open(launch.netns_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!netns.valid()) return std::unexpected(Error::Sys("launch: open " + launch.netns_path));
  }
  std::vector<char*> argv = CStrings(launch.argv), envp = CStrings(launch.env);
  std::vector<int> keep = KeptFds(launch, pipes[kReport].second.get());
  ChildPlan plan{
      path.c_str(),
      argv.data(),
      envp.data(),
      launch.cwd.empty() ? nullptr : launch.cwd.c_str(),
      netns.valid() ? netns.get() : -1,
      launch.resolv_conf.empty() ? nullptr : launch.resolv_conf.c_str(),
      {pipes[kStdin].first.get(), pipes[kStdout].second.get(), pipes[kStderr].second.get()},
      pipes[kSync].first.get(),
      pipes[kReport].second.get(),
      keep.data(),
      keep.size(),
      launch.inherited_fds.data(),
      launch.inherited_fds.size()};
  SpawnedChild child;
  child.start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid < 0) return std::unexpected(Error::Sys("fork"));
  if (pid == 0) RunChild(plan);
  if (auto released = HoldAndRelease(pid, hold, pipes, launch, path); !released) {
    KillAndReap(pid);
    return std::unexpected(released.error());
  }
  child.pid = pid;
  child.stdin_writer = std::move(pipes[kStdin].second);
  child.stdout_reader = std::move(pipes[kStdout].first);
  child.stderr_reader = std::move(pipes[kStderr].first);
  return child;
}

void KillAndReap(pid_t pid) {
  kill(pid, SIGKILL);
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace smolvm_check
