#include "monitor.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "json_bounds.h"
#include "mutant.h"

namespace smolbox::shared {
namespace {

using Clock = std::chrono::steady_clock;

// The cgroup's CPU time is sampled, and CPU time can be spent on every core at once.
constexpr int64_t kCpuPollMs = 50;
constexpr int64_t kCpuSlackMs = 100;
// POLLOUT on a pipe promises room for PIPE_BUF bytes: a write of that much never blocks, so the
// loop writes to the caller in pieces this size and keeps its deadlines while the caller is slow.
constexpr size_t kCallerWriteBytes = 4096;
// After the exit, how long a half-sent frame may take to finish, so that the channel stays in
// step for the next exec.
constexpr int kFinishFrameMs = 2000;

void KillAgent(int pidfd) { syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0); }

// A write to the caller whose EPIPE is an error rather than a SIGPIPE, whatever this process's
// disposition: the signal is blocked for the write, and one that the write raised is taken.
ssize_t WriteWithoutSigpipe(int fd, const char* data, size_t size) {
  sigset_t pipe_only, old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  sigset_t pending_before;
  sigpending(&pending_before);
  ssize_t n = write(fd, data, size);
  int saved_errno = errno;
  if (n < 0 && errno == EPIPE && !sigismember(&pending_before, SIGPIPE)) {
    timespec now{0, 0};
    sigtimedwait(&pipe_only, nullptr, &now);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = saved_errno;
  return n;
}

int64_t MsUntil(Clock::time_point t) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(t - Clock::now()).count();
  return std::max<int64_t>(0, left);
}

// When the host ends the exec whatever the agent does. A mutant without it waits a day, which
// in a test is for ever, without spinning on a deadline long past.
Clock::time_point BackstopAt(int64_t after_ms) {
  using std::chrono::milliseconds;
  if (!SMOLBOX_PROTECTED("host_backstop")) return Clock::now() + std::chrono::hours(24);
  return Clock::now() + milliseconds(after_ms);
}

class ExecMonitor {
 public:
  ExecMonitor(int channel, int pidfd, const ExecRequest& request, const ExecIo& io, const Cgroup* cpu_cgroup,
              int cancel_fd, int64_t grace_ms)
      : channel_(channel), pidfd_(pidfd), request_(request), io_(io), cgroup_(cpu_cgroup), cancel_fd_(cancel_fd),
        backstop_(BackstopAt(request.timeout_ms + grace_ms)),
        // A persistent sandbox's cgroup has run earlier execs: only this one's CPU counts.
        cpu_base_ms_(cpu_cgroup ? cpu_cgroup->CpuUsageMs().value_or(0) : 0),
        callers_{io.stdout_fd, io.stderr_fd},
        stdin_done_(!request.stdin_stream) {}

  MonitorOutcome Run() {
    while (!done_) {
      while (outgoing_.empty() && WantsStdin() && QueueStdin(/*readable=*/false)) {
      }
      enum { kChannel, kPidfd, kCancel, kStdin, kSlots };
      pollfd fds[kSlots] = {{channel_, static_cast<short>(POLLIN | (outgoing_.empty() ? 0 : POLLOUT)), 0},
                            {pidfd_, POLLIN, 0},
                            {cancel_fd_, POLLIN, 0},
                            {outgoing_.empty() && WantsStdin() ? io_.stdin_fd : -1, POLLIN, 0}};
      int rc = poll(fds, kSlots, static_cast<int>(NextWakeMs()));
      if (rc < 0 && errno != EINTR) {
        Fail(fmt::format("poll: {}", strerror(errno)));
        break;
      }
      if (fds[kChannel].revents & POLLOUT) Flush();
      if (!done_ && (fds[kChannel].revents & ~POLLOUT)) ReadChannel();
      if (!done_ && (fds[kPidfd].revents & POLLIN)) AgentExited();
      if (!done_ && fds[kCancel].revents != 0) {
        cancel_fd_ = -1;  // the caller is gone; watching it further would only spin
        Cancel();
      }
      if (!done_ && fds[kStdin].revents != 0) QueueStdin(/*readable=*/true);
      if (!done_) CheckLimits();
    }
    FinishFrame();
    return std::move(outcome_);
  }

 private:
  int64_t NextWakeMs() const {
    int64_t left = MsUntil(backstop_);
    return request_.cpu_ms > 0 ? std::min(left, kCpuPollMs) : left;
  }

  // Stdin moves only while the agent has room for it, one frame at a time.
  bool WantsStdin() const { return !stdin_done_ && stdin_sent_ - stdin_taken_ < kStdinWindowBytes; }

  // The next chunk of stdin as a frame, or its end; false when there was nothing to read yet.
  // An fd is read only once poll said so (readable), unless it is a regular file, which never
  // blocks.
  bool QueueStdin(bool readable) {
    size_t room = std::min(kStdinChunkBytes, kStdinWindowBytes - (stdin_sent_ - stdin_taken_));
    std::string chunk;
    if (io_.stdin_fd < 0) {
      chunk = io_.stdin_data.substr(std::min(data_offset_, io_.stdin_data.size()), room);
      data_offset_ += chunk.size();
    } else {
      if (!readable && !StdinIsRegularFile()) return false;
      chunk.resize(room);
      ssize_t n = read(io_.stdin_fd, chunk.data(), chunk.size());
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) return false;
      if (n < 0) outcome_.warnings.push_back(fmt::format("stdin: read failed: {}; the workload saw EOF", strerror(errno)));
      chunk.resize(static_cast<size_t>(std::max<ssize_t>(n, 0)));
    }
    if (chunk.empty()) {
      stdin_done_ = true;
      Queue(EncodeStdinEnd());
      return true;
    }
    stdin_sent_ += chunk.size();
    Queue(EncodeStdin(std::move(chunk)));
    return true;
  }

  bool StdinIsRegularFile() {
    if (!stdin_regular_) {
      struct stat st{};
      stdin_regular_ = fstat(io_.stdin_fd, &st) == 0 && S_ISREG(st.st_mode);
    }
    return *stdin_regular_;
  }

  // Frames to the agent go out without blocking: the agent may be busy sending output, and
  // this loop must go on reading it.
  void Queue(const channel::Message& message) {
    outgoing_ += channel::Encode(message);
    Flush();
  }

  void Flush() {
    while (!outgoing_.empty()) {
      ssize_t n = send(channel_, outgoing_.data(), outgoing_.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n < 0) return Broken(fmt::format("write: {}", strerror(errno)));
      outgoing_.erase(0, static_cast<size_t>(n));
    }
  }

  // A frame cut in the middle would make the agent read garbage after it. Whole frames not yet
  // begun are as good as sent: the agent drops stdin that outlived its exec.
  void FinishFrame() {
    auto deadline = Clock::now() + std::chrono::milliseconds(kFinishFrameMs);
    while (!outgoing_.empty() && Clock::now() < deadline) {
      pollfd fd{channel_, POLLOUT, 0};
      if (poll(&fd, 1, static_cast<int>(MsUntil(deadline))) <= 0 || (fd.revents & POLLOUT) == 0) break;
      ssize_t n = send(channel_, outgoing_.data(), outgoing_.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) break;
      outgoing_.erase(0, static_cast<size_t>(n));
    }
    if (!outgoing_.empty()) {
      // The channel is out of step for good: the sandbox cannot serve another exec.
      KillAgent(pidfd_);
      if (outcome_.error.empty() && !outcome_.report) outcome_.error = "agent channel: a frame could not be finished";
    }
  }

  void ReadChannel() {
    char buffer[65536];
    ssize_t n = read(channel_, buffer, sizeof buffer);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
      AgentExited();
      return;
    }
    reader_.Feed(buffer, static_cast<size_t>(n));
    for (;;) {
      auto message = reader_.Next();
      if (!message) return Broken(message.error().ToString());
      if (!*message) return;
      Handle(**message);
      if (done_) return;
    }
  }

  void Handle(const channel::Message& message) {
    if (message.Type() == "output") return Output(IntOr(message.header, "fd", 0), message.tail);
    if (message.Type() == "stdin_taken") return StdinTaken(message);
    if (message.Type() == "stdin_closed") {
      stdin_done_ = true;  // the workload closed its stdin: nothing more is read
      return;
    }
    if (message.Type() == "exit") {
      auto report = DecodeExit(message);
      if (!report) return Broken(report.error().ToString());
      outcome_.report = *report;
      done_ = true;
      return;
    }
    Broken(fmt::format("unexpected message type \"{}\" from the agent", message.Type()));
  }

  void StdinTaken(const channel::Message& message) {
    auto bytes = message.header.contains("bytes") && message.header["bytes"].is_number_unsigned()
                     ? message.header["bytes"].get<uint64_t>()
                     : UINT64_MAX;
    if (bytes > stdin_sent_ - stdin_taken_) return Broken("the agent took more stdin than it was sent");
    stdin_taken_ += bytes;
  }

  void Output(int fd, const std::string& bytes) {
    int stream = fd == 1 ? 0 : 1;
    auto cap = static_cast<size_t>(request_.output_bytes);
    size_t room = cap - std::min(cap, counted_[stream]);
    size_t keeping = std::min(room, bytes.size());
    counted_[stream] += keeping;
    Deliver(stream, std::string_view(bytes).substr(0, keeping));
    if (bytes.size() <= room) return;
    (stream == 0 ? outcome_.stdout_truncated : outcome_.stderr_truncated) = true;
    // The agent caps output itself; more than the cap means it no longer does.
    outcome_.output_overflow = true;
    KillAgent(pidfd_);
  }

  void Deliver(int stream, std::string_view bytes) {
    if (callers_[stream] < 0) {
      (stream == 0 ? outcome_.stdout_data : outcome_.stderr_data).append(bytes);
      return;
    }
    while (!bytes.empty() && !done_ && callers_[stream] >= 0) {
      pollfd fd{callers_[stream], POLLOUT, 0};
      int rc = poll(&fd, 1, static_cast<int>(MsUntil(backstop_)));
      if (rc < 0 && errno == EINTR) continue;
      if (rc == 0) return CheckLimits();  // the caller stalled the exec past its backstop
      ssize_t n = -1;
      if (fd.revents & POLLOUT) {
        n = WriteWithoutSigpipe(callers_[stream], bytes.data(), std::min(bytes.size(), kCallerWriteBytes));
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      }
      if (n <= 0) {
        // The caller closed its end: like a pipeline's writer, the exec ends.
        callers_[stream] = -1;
        Cancel();
        return;
      }
      bytes.remove_prefix(static_cast<size_t>(n));
    }
  }

  void AgentExited() {
    // Collect what the agent managed to send before it went.
    char buffer[65536];
    ssize_t n;
    while (!done_ && (n = read(channel_, buffer, sizeof buffer)) > 0) {
      reader_.Feed(buffer, static_cast<size_t>(n));
      while (!done_) {
        auto message = reader_.Next();
        if (!message || !*message) break;
        Handle(**message);
      }
    }
    if (!done_) Fail("the agent died without reporting an exit");
  }

  // The agent ends the workload and reports as usual, and the sandbox lives on for the next
  // exec; the backstop still stands behind it.
  void Cancel() {
    if (cancel_sent_) return;
    cancel_sent_ = true;
    stdin_done_ = true;
    Queue(EncodeCancel());
  }

  void CheckLimits() {
    if (Clock::now() >= backstop_) {
      outcome_.backstop_fired = true;
      KillAgent(pidfd_);
      Fail("the host backstop ended the run at timeout plus grace");
      return;
    }
    if (request_.cpu_ms <= 0 || cgroup_ == nullptr || outcome_.cpu_limit_fired) return;
    if (!SMOLBOX_PROTECTED("cpu_time_total")) return;
    auto used = cgroup_->CpuUsageMs();
    if (used && *used - cpu_base_ms_ > request_.cpu_ms + kCpuSlackMs) {
      // Many processes, each under its RLIMIT_CPU, together over the limit: the agent ends them.
      outcome_.cpu_limit_fired = true;
      Cancel();
    }
  }

  void Broken(const std::string& why) {
    KillAgent(pidfd_);
    outgoing_.clear();  // nothing more can reach a dead agent
    Fail("agent channel: " + why);
  }

  void Fail(std::string why) {
    if (outcome_.error.empty()) outcome_.error = std::move(why);
    done_ = true;
  }

  int channel_;
  int pidfd_;
  const ExecRequest& request_;
  const ExecIo& io_;
  const Cgroup* cgroup_;
  int cancel_fd_;
  bool cancel_sent_ = false;
  Clock::time_point backstop_;
  int64_t cpu_base_ms_ = 0;
  channel::FrameReader reader_{"agent message"};
  MonitorOutcome outcome_;
  bool done_ = false;
  int callers_[2];               // where stdout and stderr stream to; -1: into the outcome
  size_t counted_[2] = {0, 0};   // output bytes so far, against the cap
  std::string outgoing_;         // encoded frames for the agent, not yet written
  bool stdin_done_;              // its end is queued, or the workload closed it
  size_t stdin_sent_ = 0;
  size_t stdin_taken_ = 0;
  size_t data_offset_ = 0;       // into io.stdin_data
  std::optional<bool> stdin_regular_;
};

}  // namespace

void ApplyAgentReport(const ExecReport& r, RunResult& result) {
  result.status = r.status;
  result.exit_code = r.exit_code;
  result.signal = r.signal;
  result.usage = Usage{r.wall_ms, r.cpu_ms, r.peak_memory_bytes};
  result.limits_hit.insert(result.limits_hit.end(), r.limits_hit.begin(), r.limits_hit.end());
  if (r.status == Status::kSetupError || r.status == Status::kInternalError) result.error = r.error;
}

void ApplyOutcome(const MonitorOutcome& outcome, const std::string& backstop_warning, RunResult& result) {
  if (outcome.report) {
    ApplyAgentReport(*outcome.report, result);
    // The agent killed it because the host's CPU check asked it to.
    if (outcome.cpu_limit_fired && result.status == Status::kSignaled) result.status = Status::kCpuLimit;
    return;
  }
  result.signal = SIGKILL;
  if (outcome.backstop_fired) {
    result.status = Status::kTimeout;
    result.Warn(backstop_warning);
  } else if (outcome.cpu_limit_fired) {
    result.status = Status::kCpuLimit;
  } else if (outcome.output_overflow) {
    result.status = Status::kOutputLimit;
  } else {
    result.status = Status::kInternalError;
    result.signal = 0;
    result.error = outcome.error;
  }
}

MonitorOutcome MonitorExec(int channel, int agent_pidfd, const ExecRequest& request, const ExecIo& io,
                           const Cgroup* cpu_cgroup, int cancel_fd, int64_t grace_ms) {
  return ExecMonitor(channel, agent_pidfd, request, io, cpu_cgroup, cancel_fd, grace_ms).Run();
}

}  // namespace smolbox::shared
