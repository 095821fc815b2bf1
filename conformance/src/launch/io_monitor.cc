#include "launch/io_monitor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace smolvm_check {
namespace {

using smolbox::UniqueFd;
using Clock = std::chrono::steady_clock;

// Blocks SIGPIPE in this thread while the parent feeds stdin, and swallows the one a closed
// reader raises: the runner must not die because a payload closed its stdin.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &block, &old_);
  }
  ~SigpipeGuard() {
    if (!was_pending_) {
      sigset_t pipe_only;
      sigemptyset(&pipe_only);
      sigaddset(&pipe_only, SIGPIPE);
      timespec zero{};
      while (sigtimedwait(&pipe_only, nullptr, &zero) == SIGPIPE) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t old_{};
  bool was_pending_ = false;
};

}  // namespace

bool IoMonitor::Capture::ReadOnce() {
  char buf[65536];
  ssize_t n = read(fd.get(), buf, sizeof buf);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
  if (n <= 0) return false;
  *total += n;
  if (data->size() < cap) data->append(buf, std::min(static_cast<size_t>(n), cap - data->size()));
  return true;
}

IoMonitor::IoMonitor(pid_t pid, UniqueFd pidfd, Clock::time_point start, const Launch& launch,
                     Observation& obs, std::function<void()> kill_tree)
    : pid_(pid),
      pidfd_(std::move(pidfd)),
      start_(start),
      deadline_(start + std::chrono::milliseconds(launch.kill_after_ms)),
      launch_(launch),
      obs_(obs),
      kill_tree_(std::move(kill_tree)),
      out_{{UniqueFd(), &obs.stdout_data, &obs.stdout_bytes, launch.capture_bytes},
           {UniqueFd(), &obs.stderr_data, &obs.stderr_bytes, launch.capture_bytes}} {}

void IoMonitor::Run(UniqueFd stdin_fd, UniqueFd stdout_fd, UniqueFd stderr_fd) {
  SigpipeGuard guard;
  stdin_ = std::move(stdin_fd);
  out_[0].fd = std::move(stdout_fd);
  out_[1].fd = std::move(stderr_fd);
  for (int fd : {stdin_.get(), out_[0].fd.get(), out_[1].fd.get()}) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  if (launch_.stdin_data.empty()) stdin_.Reset();  // EOF at once
  while (!exited_) {
    if (Clock::now() >= deadline_) {
      kill_tree_();
      obs_.killed_by_net = true;
      // Again every so often: a v1 cgroup may have raced a fork, a process be in D state.
      deadline_ = Clock::now() + std::chrono::milliseconds(500);
    }
    PollOnce();
    if (!exited_) TryObserveExit();
  }
  DrainAfterExit();
}

void IoMonitor::PollOnce() {
  pollfd fds[4] = {{stdin_.get(), POLLOUT, 0},
                   {out_[0].fd.get(), POLLIN, 0},
                   {out_[1].fd.get(), POLLIN, 0},
                   {pidfd_.get(), POLLIN, 0}};
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
  // Without a pidfd (old kernels) exit is noticed by polling waitpid.
  int64_t cap = pidfd_.valid() ? left.count() : 20;
  int timeout = static_cast<int>(std::clamp<int64_t>(std::min(left.count() + 1, cap), 0, 1 << 30));
  if (poll(fds, 4, timeout) <= 0) return;
  if (fds[0].revents != 0) FeedStdin();
  for (int i = 0; i < 2; ++i) {
    if (fds[1 + i].revents != 0 && !out_[i].ReadOnce()) out_[i].fd.Reset();
  }
}

void IoMonitor::FeedStdin() {
  const std::string& data = launch_.stdin_data;
  ssize_t n = write(stdin_.get(), data.data() + stdin_done_, data.size() - stdin_done_);
  if (n > 0) stdin_done_ += static_cast<size_t>(n);
  // EPIPE: the launch closed its stdin, which is its business.
  if ((n < 0 && errno != EAGAIN && errno != EINTR) || stdin_done_ == data.size()) stdin_.Reset();
}

// WNOWAIT leaves the main process a zombie until the net goes: while it is unreaped its pid,
// which names the group and the session, cannot be recycled for a stranger that the net would
// then signal.
bool IoMonitor::TryObserveExit() {
  siginfo_t info{};
  if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
      info.si_pid != pid_) {
    return false;
  }
  exited_ = true;
  obs_.wall_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start_).count();
  if (info.si_code == CLD_EXITED) obs_.exit_code = info.si_status;
  if (info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED) obs_.signal = info.si_status;
  return true;
}

// What the main process wrote before it exited is in the pipes. A daemon may hold them open and
// keep writing, so reading stops at the first empty pipe or after a short while.
void IoMonitor::DrainAfterExit() {
  auto until = Clock::now() + std::chrono::milliseconds(200);
  for (auto& capture : out_) {
    while (capture.fd.valid() && Clock::now() < until) {
      pollfd p{capture.fd.get(), POLLIN, 0};
      if (poll(&p, 1, 0) <= 0 || !capture.ReadOnce()) break;
    }
  }
}

}  // namespace smolvm_check
