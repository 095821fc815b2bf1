// The runtime's side of a run: one poll loop over the agent's channel and its pidfd, with a
// deadline recomputed on every pass (after sandbox2's monitor). It streams the exec's stdin to
// the agent under the protocol's window, and its output to the caller's fds as it arrives.
//
// The agent enforces the wall timeout, output caps and CPU rlimit inside the sandbox. The
// monitor is the backstop for an agent that cannot: it kills the agent (and so the whole pid
// namespace) at timeout plus a grace period, caps output again on this side so the runtime's
// memory stays bounded, and watches the CPU time of the whole cgroup: past the limit, it asks
// the agent to cancel the exec (as when the caller goes away), so a persistent sandbox lives on.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cgroup.h"
#include "exec_protocol.h"
#include "smolbox/backend.h"

namespace smolbox::shared {

struct MonitorOutcome {
  std::optional<ExecReport> report;  // the agent's own account, when it gave one
  std::string stdout_data;           // what was not streamed to the caller
  std::string stderr_data;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  bool backstop_fired = false;     // the host killed the sandbox at timeout + grace
  bool cpu_limit_fired = false;    // the cgroup's CPU time passed the limit: the exec was cancelled
  bool output_overflow = false;    // the agent sent more than the cap allowed
  std::string error;               // the channel broke or the agent died without a report
  std::vector<std::string> warnings;  // about the caller's stdio: a stdin that failed to read
};

inline constexpr int64_t kBackstopGraceMs = 2000;

// The agent's account of the exec, as the result: status, exit code or signal, usage, limits
// it saw hit, and the error of a setup or internal failure.
void ApplyAgentReport(const ExecReport& report, RunResult& result);
// The whole outcome as the result: the agent's report when it gave one, else what the host
// saw (its backstop, named by backstop_warning; a CPU or output overrun), else an internal error.
void ApplyOutcome(const MonitorOutcome& outcome, const std::string& backstop_warning, RunResult& result);

// cpu_cgroup: whose CPU time counts against request.cpu_ms; null where the host cannot tell
// (a VM's emulation costs CPU the workload never used). cancel_fd (-1: none): once it is
// readable or hung up, the agent is told to cancel the exec. The backstop fires at timeout + grace.
// Output to a caller that stops reading waits for it, but no longer than the backstop; a
// caller that closed its end (EPIPE) has gone, and the exec is cancelled.
// request.stdin_stream must say whether io has a stdin.
MonitorOutcome MonitorExec(int channel, int agent_pidfd, const ExecRequest& request, const ExecIo& io,
                           const Cgroup* cpu_cgroup, int cancel_fd, int64_t grace_ms = kBackstopGraceMs);

}  // namespace smolbox::shared
