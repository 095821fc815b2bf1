// Runs the built smolbox-agent as a plain child process with a socketpair on fd 3, the way
// the ns backend does, minus the namespaces. The agent is never PID 1 here, so it must never
// kill(-1): these tests run as root on the host.
//
//   AgentProcess agent;
//   ExecResult r = agent.Run(Request({"/bin/echo", "hi"}));
//   EXPECT_EQ(r.out, "hi\n");
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "channel.h"
#include "exec_protocol.h"

namespace smolbox::testing {

inline const std::string kAgentPath = SMOLBOX_BIN_DIR "/smolbox-agent";
inline const std::string kProbePath = SMOLBOX_BIN_DIR "/syscall_probe";

// An exec request with small, test-friendly limits.
ExecRequest Request(std::vector<std::string> argv);

struct ExecResult {
  std::string out;
  std::string err;
  ExecReport report;
  size_t largest_chunk = 0;  // of the output messages
  bool complete = false;     // an exit message arrived
  size_t stdin_sent = 0;     // bytes of stdin sent before the exit or a stdin_closed
  size_t most_in_flight = 0; // the most stdin sent and not yet taken, at any time
  bool stdin_closed = false; // the agent said the workload closed its stdin
};

class AgentProcess {
 public:
  AgentProcess();  // starts the agent and consumes its ready message
  ~AgentProcess();
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool ready() const { return ready_; }

  void Send(const channel::Message& message);
  // All of them in one write(), so that the agent may read them in one read().
  void SendTogether(const std::vector<channel::Message>& messages);
  // The next message, or nothing on EOF, error or after `timeout`.
  std::optional<channel::Message> Read(
      std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Sends the request and collects output until the exit message. With stdin, streams it as
  // the host does: in chunks, never more than the window ahead of what the agent took.
  ExecResult Run(const ExecRequest& request, const std::optional<std::string>& stdin_data = std::nullopt);
  // Collects output of an exec already sent, until its exit message.
  ExecResult Collect();

  void CloseChannel();
  // The agent's exit status (as from waitpid), or nothing if it is still running at `timeout`.
  std::optional<int> WaitExit(std::chrono::milliseconds timeout);

 private:
  // One message of an exec into result; false once it was the exit (or not understood).
  bool Take(const channel::Message& message, ExecResult& result);

  pid_t pid_ = -1;
  int channel_ = -1;
  bool ready_ = false;
  std::optional<int> exit_status_;
};

}  // namespace smolbox::testing
