#include "reaper.h"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>

namespace smolbox::agent {
namespace {

// Set while a zygote lives beside the workloads; see KillByCgroup.
const WorkloadCgroup* kill_cgroup = nullptr;

}  // namespace

void KillByCgroup(const WorkloadCgroup* cgroup) { kill_cgroup = cgroup; }

void KillWorkloads(pid_t pgid) {
  // kill(-1, SIGKILL) signals every process the caller may signal. Sent by PID 1 of a pid
  // namespace, that is exactly the sandbox minus the agent itself, daemons and setsid()
  // escapees included. Sent by anyone else it is every process of the user: the tests run
  // the agent as a plain process on the host, as root, where it would end the whole machine.
  // So only PID 1 ever sends it; everyone else kills the workload's process group.
  if (getpid() == 1 && kill_cgroup != nullptr) {
    kill_cgroup->Kill();
  } else if (getpid() == 1) {
    kill(-1, SIGKILL);
  } else if (pgid > 1) {
    // Never kill(-0) or kill(-1): the agent's own group, or everything.
    kill(-pgid, SIGKILL);
  }
}

Expected<ChildSignals> ChildSignals::Create() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0) {
    return std::unexpected(Error::Sys("sigprocmask(SIG_BLOCK, SIGCHLD)"));
  }
  UniqueFd fd(signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!fd.valid()) return std::unexpected(Error::Sys("signalfd(SIGCHLD)"));
  return ChildSignals(std::move(fd));
}

void ChildSignals::Drain() const {
  std::array<signalfd_siginfo, 16> infos;
  while (read(fd_.get(), infos.data(), sizeof infos) > 0) {
  }
}

ReapResult ReapExited(pid_t main_pid) {
  ReapResult result;
  for (;;) {
    int status = 0;
    rusage usage{};
    pid_t pid = wait4(-1, &status, WNOHANG, &usage);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) {
      result.no_children_left = (errno == ECHILD);
      return result;
    }
    if (pid == 0) return result;
    if (pid == main_pid) result.main = MainExit{status, usage};
  }
}

namespace {

bool TreeGone(pid_t pgid, const ReapResult& reaped) {
  // As PID 1 every process of the sandbox is a child (or an orphan adopted as one).
  // With a zygote alive that is never so: then the workload cgroup says.
  if (getpid() == 1 && kill_cgroup != nullptr) return !kill_cgroup->Populated();
  if (getpid() == 1) return reaped.no_children_left;
  return pgid <= 1 || (kill(-pgid, 0) != 0 && errno == ESRCH);
}

}  // namespace

bool WaitTreeGone(pid_t pgid, const ChildSignals& signals, std::chrono::milliseconds bound) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + bound;
  for (;;) {
    if (TreeGone(pgid, ReapExited(-1))) return true;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    // Zombies that are not our children are reaped by their own parent, which no SIGCHLD of
    // ours announces: wake up now and then to look again.
    pollfd fd{signals.fd(), POLLIN, 0};
    poll(&fd, 1, static_cast<int>(std::min<int64_t>(left.count(), 20)));
    signals.Drain();
  }
}

}  // namespace smolbox::agent
