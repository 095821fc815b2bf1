#include "agent_harness.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

namespace smolbox::testing {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void ExecAgent(int channel) {
  // The agent expects its channel on fd 3, as the ns backend passes it.
  if (channel == 3) {
    fcntl(3, F_SETFD, 0);
  } else {
    dup2(channel, 3);
  }
  execl(kAgentPath.c_str(), "smolbox-agent", "--channel-fd", "3", nullptr);
  _exit(127);
}

bool Readable(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, static_cast<int>(timeout.count())) == 1;
}

}  // namespace

ExecRequest Request(std::vector<std::string> argv) {
  ExecRequest request;
  request.argv = std::move(argv);
  request.env = {{"PATH", "/usr/bin:/bin"}};
  request.cwd = "/";
  request.timeout_ms = 10'000;
  request.output_bytes = 1 << 20;
  request.files = 256;
  return request;
}

AgentProcess::AgentProcess() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    ADD_FAILURE() << "socketpair: " << strerror(errno);
    return;
  }
  pid_ = fork();
  if (pid_ == 0) ExecAgent(fds[1]);
  close(fds[1]);
  channel_ = fds[0];
  auto ready = Read(std::chrono::seconds(10));
  ready_ = ready && ready->Type() == "ready";
  EXPECT_TRUE(ready_) << "the agent did not send ready";
}

AgentProcess::~AgentProcess() {
  CloseChannel();
  if (pid_ > 0 && !WaitExit(std::chrono::seconds(10))) {
    ADD_FAILURE() << "the agent outlived its channel";
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

void AgentProcess::Send(const channel::Message& message) {
  auto sent = channel::WriteMessage(channel_, message);
  EXPECT_TRUE(sent) << (sent ? "" : sent.error().ToString());
}

void AgentProcess::SendTogether(const std::vector<channel::Message>& messages) {
  std::string bytes;
  for (const auto& message : messages) bytes += channel::Encode(message);
  EXPECT_EQ(write(channel_, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
}

std::optional<channel::Message> AgentProcess::Read(std::chrono::milliseconds timeout) {
  if (channel_ < 0 || !Readable(channel_, timeout)) return std::nullopt;
  auto message = channel::ReadMessage(channel_);
  if (!message) {
    ADD_FAILURE() << message.error().ToString();
    return std::nullopt;
  }
  return *message;
}

ExecResult AgentProcess::Run(const ExecRequest& request, const std::optional<std::string>& stdin_data) {
  ExecRequest streamed = request;
  streamed.stdin_stream = stdin_data.has_value();
  Send(EncodeExec(streamed));
  if (!stdin_data) return Collect();
  // As the host does: frames go out without blocking, for the agent may be blocked sending
  // output that only this loop reads.
  ExecResult result;
  std::string outgoing;
  size_t taken = 0;
  bool ended = false;
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!result.complete && Clock::now() < deadline) {
    while (outgoing.empty() && !result.stdin_closed && !ended &&
           result.stdin_sent - taken < kStdinWindowBytes) {
      size_t size = std::min({kStdinChunkBytes, stdin_data->size() - result.stdin_sent,
                              kStdinWindowBytes - (result.stdin_sent - taken)});
      if (size == 0) {
        outgoing = channel::Encode(EncodeStdinEnd());
        ended = true;
        break;
      }
      outgoing = channel::Encode(EncodeStdin(stdin_data->substr(result.stdin_sent, size)));
      result.stdin_sent += size;
      result.most_in_flight = std::max(result.most_in_flight, result.stdin_sent - taken);
    }
    pollfd fd{channel_, static_cast<short>(POLLIN | (outgoing.empty() ? 0 : POLLOUT)), 0};
    if (poll(&fd, 1, 1000) <= 0) continue;
    if (fd.revents & POLLOUT) {
      ssize_t n = send(channel_, outgoing.data(), outgoing.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) outgoing.erase(0, static_cast<size_t>(n));
    }
    if ((fd.revents & POLLIN) == 0) continue;
    auto message = Read();
    if (!message) break;
    if (message->Type() == "stdin_taken") {
      taken += message->header.value("bytes", size_t{0});
    } else if (message->Type() == "stdin_closed") {
      result.stdin_closed = true;
    } else if (!Take(*message, result)) {
      break;
    }
  }
  EXPECT_TRUE(result.complete) << "no exit message";
  return result;
}

ExecResult AgentProcess::Collect() {
  ExecResult result;
  while (auto message = Read()) {
    if (!Take(*message, result)) break;
  }
  EXPECT_TRUE(result.complete) << "no exit message";
  return result;
}

bool AgentProcess::Take(const channel::Message& message, ExecResult& result) {
  // Only Run, which streams the stdin, counts these.
  if (message.Type() == "stdin_taken" || message.Type() == "stdin_closed") return true;
  if (message.Type() == "output") {
    int fd = message.header.value("fd", 0);
    (fd == 1 ? result.out : result.err) += message.tail;
    result.largest_chunk = std::max(result.largest_chunk, message.tail.size());
    return true;
  }
  EXPECT_EQ(message.Type(), "exit") << message.header.dump();
  auto report = DecodeExit(message);
  EXPECT_TRUE(report) << (report ? "" : report.error().ToString());
  if (report) result.report = *report;
  result.complete = report.has_value();
  return false;
}

void AgentProcess::CloseChannel() {
  if (channel_ >= 0) close(channel_);
  channel_ = -1;
}

std::optional<int> AgentProcess::WaitExit(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (!exit_status_ && pid_ > 0) {
    int status = 0;
    pid_t got = waitpid(pid_, &status, WNOHANG);
    if (got == pid_) {
      exit_status_ = status;
    } else if (Clock::now() >= deadline) {
      break;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return exit_status_;
}

}  // namespace smolbox::testing
