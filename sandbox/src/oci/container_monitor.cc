#include "container_monitor.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "net.h"
#include "process_io.h"
#include "smolbox/backend.h"
#include "smolbox/image_store.h"
#include "state.h"
#include "unique_fd.h"

namespace smolbox::oci {
namespace {

[[noreturn]] void Fail(const MonitorPlan& plan, const Error& error) {
  ReportReady(plan.ready_fd, error.ToString());
  _exit(1);
}

// Until start writes to the fifo (true), or a signal or the sandbox's death ends the wait.
bool AwaitStart(int fifo, int signal_fd, int death_fd) {
  pollfd fds[3] = {{fifo, POLLIN, 0}, {signal_fd, POLLIN, 0}, {death_fd, POLLIN, 0}};
  while (poll(fds, 3, -1) < 0) {
    if (errno != EINTR) return false;
  }
  char byte;
  return (fds[0].revents & POLLIN) && read(fifo, &byte, 1) == 1;
}

void WriteStatus(const MonitorPlan& plan, ContainerState& state, ContainerStatus status,
                 std::optional<int> exit_code = {}) {
  state.status = status;
  state.exit_code = exit_code;
  (void)plan.dir.Write(state);
}

// A network namespace of the container's own, when its hooks set it up (docker's): made here, as
// runc makes it, with lo up, so that a hook finds it at /proc/<the container's pid>/ns/net; the
// sandbox is then born in it. Then createRuntime and prestart, which see the container creating.
Expected<void> PrepareNetwork(MonitorPlan& plan, const ContainerState& state) {
  if (plan.container.own_network_namespace) {
    if (unshare(CLONE_NEWNET) != 0)
      return std::unexpected(Error::Sys("unshare the container's network namespace"));
    SMOLBOX_TRY(confine::BringUpLoopback());
    plan.container.run.sandbox.network_namespace = fmt::format("/proc/{}/ns/net", getpid());
  }
  std::string creating = StateJson(state, ContainerStatus::kCreating);
  SMOLBOX_TRY(RunHooks(plan.container.hooks.create_runtime, "createRuntime", creating));
  return RunHooks(plan.container.hooks.prestart, "prestart", creating);
}

}  // namespace

int ContainerExitCode(const RunResult& result) {
  if (result.status == Status::kExited && result.exit_code >= 0) return result.exit_code;
  if (result.signal > 0) return 128 + result.signal;
  if (result.status == Status::kMemoryLimit) return 128 + SIGKILL;
  return 125;  // it never ran: the runtime's own failure, as docker reports one
}

void RunMonitor(MonitorPlan plan) {
  auto signals = BlockEndingSignals();
  if (!signals) Fail(plan, signals.error());
  auto taken = TakeConsole(plan.container.terminal, plan.console_socket);
  if (!taken) Fail(plan, taken.error());
  UniqueFd console = std::move(*taken);
  ContainerState state = plan.state;
  state.pid = getpid();
  state.pid_start = shared::ProcessStartTime(state.pid).value_or(0);
  if (auto network = PrepareNetwork(plan, state); !network) Fail(plan, network.error());
  SandboxSpec& sandbox = plan.container.run.sandbox;
  if (sandbox.backend == BackendKind::kVm) {
    // The guest mounts its image as a disk: one of the bundle's rootfs, the container's own.
    sandbox.image_disk = plan.dir.path() + "/rootfs.erofs";
    if (auto made = image::MakeErofsDisk(sandbox.image_disk, sandbox.image); !made)
      Fail(plan, made.error());
  } else {
    sandbox.attach_socket = plan.dir.attach_socket();
  }
  auto backend = MakeBackend(plan.container.run.sandbox.backend);
  if (!backend) Fail(plan, backend.error());
  RunResult setup;
  std::unique_ptr<Session> session = (*backend)->Start(plan.container.run.sandbox, setup);
  if (!session) Fail(plan, Error{"start the sandbox", setup.error, 0});
  UniqueFd fifo(open(plan.dir.fifo().c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW));
  if (!fifo.valid()) Fail(plan, Error::Sys("open " + plan.dir.fifo()));
  WriteStatus(plan, state, ContainerStatus::kCreated);
  if (!ReportReady(plan.ready_fd, "")) {
    // Its create was killed on the way: no engine knows of this container, so nothing of it
    // may stay.
    session.reset();
    (void)plan.dir.Remove();
    _exit(1);
  }
  if (!AwaitStart(fifo.get(), signals->get(), session->death_fd())) {
    int signal = TakeSignal(signals->get());
    WriteStatus(plan, state, ContainerStatus::kStopped, 128 + (signal ? signal : SIGKILL));
    session.reset();
    _exit(128 + (signal ? signal : SIGKILL));
  }
  WriteStatus(plan, state, ContainerStatus::kRunning);
  // The spec's poststart, as start returns (the process is handed to the agent next); a failure
  // is the log's, not the process's.
  if (auto hooked = RunHooks(plan.container.hooks.poststart, "poststart",
                             StateJson(state, ContainerStatus::kRunning));
      !hooked) {
    fmt::print(stderr, "smolbox oci: warning: {}\n", hooked.error().ToString());
  }
  ExecIo io;
  io.stdin_fd = console.valid() ? console.get() : 0;
  io.stdout_fd = console.valid() ? console.get() : 1;
  io.stderr_fd = console.valid() ? console.get() : 2;
  RunResult result = session->Exec(plan.container.run.exec, io, signals->get());
  int signal = TakeSignal(signals->get());
  int code = signal ? 128 + signal : ContainerExitCode(result);
  if (!result.error.empty())
    fmt::print(stderr, "smolbox oci: {}: {}\n", ToString(result.status), result.error);
  WriteStatus(plan, state, ContainerStatus::kStopped, code);
  session.reset();
  _exit(code);
}

}  // namespace smolbox::oci
