#include "monitor.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "json_bounds.h"

namespace smolbox::ns {
namespace {

using Clock = std::chrono::steady_clock;

// The cgroup's CPU time is sampled, and CPU time can be spent on every core at once.
constexpr int64_t kCpuPollMs = 50;
constexpr int64_t kCpuSlackMs = 100;

void KillAgent(int pidfd) { syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0); }

class ExecMonitor {
 public:
  ExecMonitor(int channel, int pidfd, const ExecRequest& request, const Cgroup* cpu_cgroup, int cancel_fd,
              int64_t grace_ms)
      : channel_(channel), pidfd_(pidfd), request_(request), cgroup_(cpu_cgroup), cancel_fd_(cancel_fd),
        backstop_(Clock::now() + std::chrono::milliseconds(request.timeout_ms + grace_ms)),
        // A persistent sandbox's cgroup has run earlier execs: only this one's CPU counts.
        cpu_base_ms_(cpu_cgroup ? cpu_cgroup->CpuUsageMs().value_or(0) : 0) {}

  MonitorOutcome Run() {
    while (!done_) {
      pollfd fds[3] = {{channel_, POLLIN, 0}, {pidfd_, POLLIN, 0}, {cancel_fd_, POLLIN, 0}};
      int rc = poll(fds, 3, static_cast<int>(NextWakeMs()));
      if (rc < 0 && errno != EINTR) {
        Fail(fmt::format("poll: {}", strerror(errno)));
        break;
      }
      if (fds[0].revents) ReadChannel();
      if (!done_ && (fds[1].revents & POLLIN)) AgentExited();
      if (!done_ && fds[2].revents != 0) {
        cancel_fd_ = -1;  // the caller is gone; watching it further would only spin
        Cancel();
      }
      if (!done_) CheckLimits();
    }
    return std::move(outcome_);
  }

 private:
  int64_t NextWakeMs() const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(backstop_ - Clock::now()).count();
    left = std::max<int64_t>(0, left);
    return request_.cpu_ms > 0 ? std::min(left, kCpuPollMs) : left;
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
    if (message.Type() == "exit") {
      auto report = DecodeExit(message);
      if (!report) return Broken(report.error().ToString());
      outcome_.report = *report;
      done_ = true;
      return;
    }
    Broken(fmt::format("unexpected message type \"{}\" from the agent", message.Type()));
  }

  void Output(int fd, const std::string& bytes) {
    bool is_out = fd == 1;
    std::string& sink = is_out ? outcome_.stdout_data : outcome_.stderr_data;
    bool& truncated = is_out ? outcome_.stdout_truncated : outcome_.stderr_truncated;
    auto cap = static_cast<size_t>(request_.output_bytes);
    size_t room = cap - std::min(cap, sink.size());
    sink.append(bytes, 0, std::min(room, bytes.size()));
    if (bytes.size() <= room) return;
    truncated = true;
    // The agent caps output itself; more than the cap means it no longer does.
    outcome_.output_overflow = true;
    KillAgent(pidfd_);
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
    if (auto sent = channel::WriteMessage(channel_, EncodeCancel()); !sent) Broken(sent.error().ToString());
  }

  void CheckLimits() {
    if (Clock::now() >= backstop_) {
      outcome_.backstop_fired = true;
      KillAgent(pidfd_);
      Fail("the host backstop ended the run at timeout plus grace");
      return;
    }
    if (request_.cpu_ms <= 0 || cgroup_ == nullptr || outcome_.cpu_limit_fired) return;
    auto used = cgroup_->CpuUsageMs();
    if (used && *used - cpu_base_ms_ > request_.cpu_ms + kCpuSlackMs) {
      // Many processes, each under its RLIMIT_CPU, together over the limit: the agent ends them.
      outcome_.cpu_limit_fired = true;
      Cancel();
    }
  }

  void Broken(const std::string& why) {
    KillAgent(pidfd_);
    Fail("agent channel: " + why);
  }

  void Fail(std::string why) {
    if (outcome_.error.empty()) outcome_.error = std::move(why);
    done_ = true;
  }

  int channel_;
  int pidfd_;
  const ExecRequest& request_;
  const Cgroup* cgroup_;
  int cancel_fd_;
  bool cancel_sent_ = false;
  Clock::time_point backstop_;
  int64_t cpu_base_ms_ = 0;
  channel::FrameReader reader_{"agent message"};
  MonitorOutcome outcome_;
  bool done_ = false;
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

MonitorOutcome MonitorExec(int channel, int agent_pidfd, const ExecRequest& request,
                           const Cgroup* cpu_cgroup, int cancel_fd, int64_t grace_ms) {
  return ExecMonitor(channel, agent_pidfd, request, cpu_cgroup, cancel_fd, grace_ms).Run();
}

}  // namespace smolbox::ns
