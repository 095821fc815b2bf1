#include "exec_monitor.h"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include "agent_session.h"
#include "attach_socket.h"
#include "channel.h"
#include "container_monitor.h"
#include "process_io.h"

namespace smolbox::oci {
namespace {

// The attached agent says "ready" at once, unless the sandbox is ending.
constexpr int kReadyWaitMs = 10000;

[[noreturn]] void Fail(const ExecPlan& plan, const Error& error) {
  ReportReady(plan.ready_fd, error.ToString());
  _exit(1);
}

// The attached agent's first message.
Expected<void> AwaitAgent(int channel) {
  pollfd fd{channel, POLLIN, 0};
  if (poll(&fd, 1, kReadyWaitMs) <= 0)
    return std::unexpected(Error{"exec", "the container did not answer within 10 s", 0});
  SMOLBOX_ASSIGN_OR_RETURN(auto message, channel::ReadMessage(channel, "the container's answer"));
  if (!message || message->Type() != "ready")
    return std::unexpected(Error{"exec", "the container is ending, or refused the exec", 0});
  return {};
}

}  // namespace

void RunExecMonitor(ExecPlan plan) {
  auto signals = BlockEndingSignals();
  if (!signals) Fail(plan, signals.error());
  auto taken = TakeConsole(plan.process.terminal, plan.console_socket);
  if (!taken) Fail(plan, taken.error());
  UniqueFd console = std::move(*taken);
  auto channel = shared::ConnectAttachSocket(plan.attach_socket);
  if (!channel)
    Fail(plan, Error{"exec", "the container is not running: " + channel.error().ToString(), 0});
  if (auto ready = AwaitAgent(channel->get()); !ready) Fail(plan, ready.error());
  // The session's sandbox is the attached agent alone: no cgroup of its own to judge by (the
  // process is in the container's, which holds its limits where it can; the rlimit stand-ins
  // are set anyway), no storage to copy back (the container's process does that at its end),
  // and no process to watch but the channel, which closes when the container ends.
  shared::AgentSandbox sandbox;
  sandbox.backend = "ns";
  sandbox.isolation = "namespaces";
  sandbox.spec = &plan.sandbox;
  sandbox.channel = channel->get();
  sandbox.death_reason = "the container ended";
  sandbox.uid = plan.process.user.uid;
  sandbox.gid = plan.process.user.gid;
  sandbox.stand_ins_without_cgroup = true;
  shared::AgentSession session(sandbox);
  if (!ReportReady(plan.ready_fd, "")) _exit(1);  // its exec was killed: no one waits for it
  ExecIo io;
  io.stdin_fd = console.valid() ? console.get() : 0;
  io.stdout_fd = console.valid() ? console.get() : 1;
  io.stderr_fd = console.valid() ? console.get() : 2;
  RunResult result = session.Exec(plan.process.exec, io, signals->get());
  int signal = TakeSignal(signals->get());
  if (!result.error.empty())
    fmt::print(stderr, "smolbox oci: exec: {}: {}\n", ToString(result.status), result.error);
  // An agent that went away without a report was killed with the rest of the container when its
  // process ended; runc's exec processes die of that container's end by SIGKILL, and say so.
  if (!signal && result.status == Status::kInternalError) signal = SIGKILL;
  _exit(signal ? 128 + signal : ContainerExitCode(result));
}

}  // namespace smolbox::oci
