#include "pump.h"

#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <climits>
#include <deque>
#include <optional>
#include <string>

#include "mutant.h"
#include "outcome.h"

namespace smolbox::agent {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Output goes to the host in chunks of at most this, each as soon as it is read: the agent
// holds one chunk, whatever the workload prints.
constexpr size_t kChunkBytes = 64 * 1024;
// Once the main process has ended and the tree is killed, how long the pipes may take to reach
// EOF. Only a process that escaped the kill keeps them open longer, and that can happen only
// when the agent is not PID 1.
constexpr milliseconds kDrainGrace{500};
// How long the end of an exec waits for the killed tree to be reaped.
constexpr milliseconds kReapBound{2000};
// How often the tree's CPU time is read while a cpu_ms limit applies, and how far past the
// limit it may get before the tree is ended: the host's monitor uses the same on ns.
constexpr milliseconds kCpuPoll{50};
constexpr int64_t kCpuSlackMs = 100;

struct Stream {
  UniqueFd fd;
  int number;  // 1 or 2: the fd the host sees
  int64_t forwarded = 0;
  bool truncated = false;
};

class ExecPump {
 public:
  ExecPump(Connection& connection, const ChildSignals& signals, const ExecRequest& request,
           Workload workload, const CpuMeter& cpu_meter, AttachPoint* attach)
      : connection_(connection),
        signals_(signals),
        attach_(attach),
        request_(request),
        workload_(std::move(workload)),
        stdout_{std::move(workload_.stdout_fd), 1},
        stderr_{std::move(workload_.stderr_fd), 2},
        buffer_(kChunkBytes, '\0') {
    if (request_.timeout_ms > 0 && SMOLBOX_PROTECTED("agent_timeout")) {
      deadline_ = workload_.started + milliseconds(request_.timeout_ms);
    }
    if (request_.cpu_ms > 0 && cpu_meter && SMOLBOX_PROTECTED("cpu_time_total")) cpu_meter_ = cpu_meter;
  }

  ExecReport Run() {
    if (!request_.stdin_stream) workload_.stdin_fd.Reset();
    // A cancel may have come in the same read as its exec: poll would not see it again.
    TakeHostMessages();
    while (!Done(Clock::now())) PollOnce();
    return Finish();
  }

 private:
  bool Done(Clock::time_point now) const {
    if (!main_exit_) return false;
    return (!stdout_.fd.valid() && !stderr_.fd.valid()) || now >= *drain_deadline_;
  }

  // Recomputed on every pass: the time left to the deadline that applies now, or -1 when
  // only an event (I/O, SIGCHLD) can move things on.
  int PollTimeoutMs(Clock::time_point now) const {
    std::optional<Clock::time_point> next;
    if (main_exit_) {
      next = drain_deadline_;
    } else if (kill_reason_ == KillReason::kNone) {
      next = deadline_;
      if (cpu_meter_ && (!next || *next > now + kCpuPoll)) next = now + kCpuPoll;
    }
    if (!next) return -1;
    int64_t left = std::chrono::ceil<milliseconds>(*next - now).count();
    return static_cast<int>(std::clamp<int64_t>(left, 0, INT_MAX));
  }

  void PollOnce() {
    enum { kSignals, kChannel, kStdin, kStdout, kStderr, kAttach, kSlots };
    std::array<pollfd, kSlots> fds{};
    fds[kSignals] = {signals_.fd(), POLLIN, 0};
    fds[kChannel] = {connection_.closed() ? -1 : connection_.fd(), POLLIN, 0};
    fds[kStdin] = {stdin_queue_.empty() ? -1 : workload_.stdin_fd.get(), POLLOUT, 0};
    fds[kStdout] = {stdout_.fd.get(), POLLIN, 0};
    fds[kStderr] = {stderr_.fd.get(), POLLIN, 0};
    fds[kAttach] = {attach_ && !main_exit_ ? attach_->fd() : -1, POLLIN, 0};
    if (poll(fds.data(), fds.size(), PollTimeoutMs(Clock::now())) < 0 && errno != EINTR) {
      fmt::print(stderr, "smolbox-agent: poll: {}\n", std::strerror(errno));
      usleep(10'000);  // the deadlines below still apply; do not spin
    }
    if (fds[kSignals].revents != 0) signals_.Drain();
    if (fds[kStdin].revents != 0) FeedStdin();
    if (fds[kStdout].revents != 0) Relay(stdout_);
    if (fds[kStderr].revents != 0) Relay(stderr_);
    if (fds[kChannel].revents != 0) WatchHost();
    if (fds[kAttach].revents != 0) attach_->AcceptOne();
    // Every pass, not only on SIGCHLD: one cheap wait4 and nothing depends on signal timing.
    Reap(Clock::now());
    CheckDeadline(Clock::now());
    CheckCpuTime();
  }

  // Writes what the host sent, in order, as the pipe takes it; each chunk written whole is
  // acknowledged, which lets the host send more.
  void FeedStdin() {
    while (!stdin_queue_.empty() && workload_.stdin_fd.valid()) {
      const std::string& chunk = stdin_queue_.front();
      ssize_t n = write(workload_.stdin_fd.get(), chunk.data() + stdin_offset_, chunk.size() - stdin_offset_);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      if (n < 0) return CloseStdin(true);  // EPIPE: the workload closed its stdin, which is its right
      stdin_offset_ += static_cast<size_t>(n);
      if (stdin_offset_ < chunk.size()) continue;
      stdin_queued_ -= chunk.size();
      Tell(EncodeStdinTaken(chunk.size()));
      stdin_queue_.pop_front();
      stdin_offset_ = 0;
    }
    if (stdin_queue_.empty() && stdin_ended_) CloseStdin(false);
  }

  // EOF for the workload. tell_host: the host should stop sending, as nothing will be read.
  void CloseStdin(bool tell_host) {
    if (tell_host && workload_.stdin_fd.valid()) Tell(EncodeStdinClosed());
    workload_.stdin_fd.Reset();
    stdin_queue_.clear();
    stdin_queued_ = 0;
    stdin_offset_ = 0;
  }

  void TakeStdin(const channel::Message& message) {
    if (message.Type() == "stdin_end") {
      stdin_ended_ = true;
      if (stdin_queue_.empty()) CloseStdin(false);
      return;
    }
    // After the workload closed its stdin, the frames already under way are dropped.
    if (!workload_.stdin_fd.valid() || message.tail.empty()) return;
    if (message.tail.size() > kStdinChunkBytes || stdin_queued_ + message.tail.size() > kStdinWindowBytes) {
      fmt::print(stderr, "smolbox-agent: the host sent stdin past its window\n");
      Kill(KillReason::kHostGone);
      return CloseStdin(false);
    }
    stdin_queued_ += message.tail.size();
    stdin_queue_.push_back(message.tail);
  }

  void Tell(const channel::Message& message) {
    if (!connection_.closed() && !connection_.Send(message)) Kill(KillReason::kHostGone);
  }

  void Relay(Stream& stream) {
    ssize_t n = read(stream.fd.get(), buffer_.data(), buffer_.size());
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
      stream.fd.Reset();
      return;
    }
    Forward(stream, static_cast<size_t>(n));
  }

  // Up to the cap, then nothing more: a byte past the cap ends the workload.
  void Forward(Stream& stream, size_t size) {
    int64_t room = SMOLBOX_PROTECTED("output_cap") ? std::max<int64_t>(0, request_.output_bytes - stream.forwarded)
                                                   : static_cast<int64_t>(size);
    size_t sending = std::min(size, static_cast<size_t>(room));
    if (sending > 0 && !connection_.closed()) {
      channel::Message output{{{"type", "output"}, {"fd", stream.number}},
                              std::string(buffer_.data(), sending)};
      if (!connection_.Send(output)) Kill(KillReason::kHostGone);
    }
    stream.forwarded += static_cast<int64_t>(sending);
    if (size > sending) {
      stream.truncated = true;
      Kill(KillReason::kOutputLimit);
    }
  }

  // EOF matters: with the host gone, the exec is pointless.
  void WatchHost() {
    if (auto read = connection_.ReadAvailable(); !read) {
      fmt::print(stderr, "smolbox-agent: {}\n", read.error().ToString());
    }
    TakeHostMessages();
    if (connection_.closed()) Kill(KillReason::kHostGone);
  }

  // During an exec the host sends its stdin and perhaps a "cancel".
  void TakeHostMessages() {
    for (;;) {
      auto message = connection_.Next();
      if (!message || !*message) break;
      if (IsCancel(**message)) {
        Kill(KillReason::kCancelled);
      } else if (IsStdinFrame(**message)) {
        TakeStdin(**message);
        FeedStdin();
      } else {
        fmt::print(stderr, "smolbox-agent: ignored a {:?} message during an exec\n", (*message)->Type());
      }
    }
  }

  void Reap(Clock::time_point now) {
    ReapResult reaped = ReapExited(workload_.pid);
    if (!reaped.main) return;
    main_exit_ = reaped.main;
    wall_ = std::chrono::duration_cast<milliseconds>(now - workload_.started);
    // The exec is over with its main process: nothing it started may outlive it.
    KillWorkloads(workload_.pid);
    CloseStdin(false);
    drain_deadline_ = now + kDrainGrace;
  }

  void CheckDeadline(Clock::time_point now) {
    if (deadline_ && !main_exit_ && kill_reason_ == KillReason::kNone && now >= *deadline_) {
      Kill(KillReason::kTimeout);
    }
  }

  // Many processes, each under its RLIMIT_CPU, may together use more than the limit.
  void CheckCpuTime() {
    if (!cpu_meter_ || main_exit_ || kill_reason_ != KillReason::kNone) return;
    if (cpu_meter_() > request_.cpu_ms + kCpuSlackMs) Kill(KillReason::kCpuLimit);
  }

  void Kill(KillReason reason) {
    if (kill_reason_ == KillReason::kNone) kill_reason_ = reason;
    KillWorkloads(workload_.pid);
  }

  ExecReport Finish() {
    stdout_.fd.Reset();
    stderr_.fd.Reset();
    KillWorkloads(workload_.pid);
    if (!WaitTreeGone(workload_.pid, signals_, kReapBound)) {
      fmt::print(stderr, "smolbox-agent: processes of exec {} outlived it\n", workload_.pid);
    }
    Ending ending;
    ending.wait_status = main_exit_->wait_status;
    ending.main_usage = main_exit_->usage;
    ending.children_before = workload_.children_before;
    getrusage(RUSAGE_CHILDREN, &ending.children_after);
    ending.wall = wall_;
    ending.kill_reason = kill_reason_;
    ending.stdout_truncated = stdout_.truncated;
    ending.stderr_truncated = stderr_.truncated;
    return Judge(ending, request_);
  }

  Connection& connection_;
  const ChildSignals& signals_;
  AttachPoint* attach_;
  const ExecRequest& request_;
  Workload workload_;
  Stream stdout_;
  Stream stderr_;
  std::string buffer_;
  std::deque<std::string> stdin_queue_;  // sent by the host, not yet in the pipe
  size_t stdin_queued_ = 0;              // their bytes, at most the window
  size_t stdin_offset_ = 0;              // of the front chunk, written already
  bool stdin_ended_ = false;
  CpuMeter cpu_meter_;  // empty: no cpu_ms, or the host enforces it
  std::optional<Clock::time_point> deadline_;
  std::optional<Clock::time_point> drain_deadline_;
  std::optional<MainExit> main_exit_;
  milliseconds wall_{0};
  KillReason kill_reason_ = KillReason::kNone;
};

}  // namespace

ExecReport PumpExec(Connection& connection, const ChildSignals& signals, const ExecRequest& request,
                    Workload workload, const CpuMeter& cpu_meter, AttachPoint* attach) {
  return ExecPump(connection, signals, request, std::move(workload), cpu_meter, attach).Run();
}

}  // namespace smolbox::agent
