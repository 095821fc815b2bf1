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
#include "smolbox/backend.h"
#include "state.h"
#include "unique_fd.h"

namespace smolbox::oci {
namespace {

// What `kill` may send the monitor and have end the container cleanly; SIGKILL ends it outright
// and the next runtime call sweeps what it held.
constexpr int kEndingSignals[] = {SIGTERM, SIGINT,  SIGHUP,  SIGQUIT,
                                  SIGUSR1, SIGUSR2, SIGPIPE, SIGALRM};

Expected<UniqueFd> BlockEndingSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int signal : kEndingSignals) sigaddset(&set, signal);
  if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0) return std::unexpected(Error::Sys("sigprocmask"));
  int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0) return std::unexpected(Error::Sys("signalfd"));
  return UniqueFd(fd);
}

// The pending signal's number, or 0.
int TakeSignal(int signal_fd) {
  signalfd_siginfo info{};
  return read(signal_fd, &info, sizeof info) == sizeof info ? static_cast<int>(info.ssi_signo) : 0;
}

// A pty of the host's devpts whose master goes to the engine's console socket, as runc sends it;
// the process's stdio is its slave.
Expected<UniqueFd> OpenConsole(const std::string& socket_path) {
  UniqueFd master(posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!master.valid() || grantpt(master.get()) != 0 || unlockpt(master.get()) != 0) {
    return std::unexpected(Error::Sys("open a pty"));
  }
  char name[64];
  if (ptsname_r(master.get(), name, sizeof name) != 0)
    return std::unexpected(Error::Sys("ptsname"));
  UniqueFd slave(open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!slave.valid()) return std::unexpected(Error::Sys(fmt::format("open {}", name)));
  UniqueFd sock(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof address.sun_path)
    return std::unexpected(Error::Field("--console-socket", "path too long"));
  std::memcpy(address.sun_path, socket_path.data(), socket_path.size());
  if (!sock.valid() ||
      connect(sock.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    return std::unexpected(Error::Sys("connect to the console socket " + socket_path));
  }
  iovec payload{name, strlen(name)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &payload;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  int fd = master.get();
  std::memcpy(CMSG_DATA(header), &fd, sizeof fd);
  if (sendmsg(sock.get(), &message, MSG_NOSIGNAL) < 0)
    return std::unexpected(Error::Sys("send the pty to the console socket"));
  return slave;
}

// False when create is gone (SIGPIPE is blocked here, so the write fails with EPIPE).
bool Report(int ready_fd, const std::string& line) {
  std::string text = line + "\n";
  bool told = write(ready_fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(ready_fd);
  return told;
}

[[noreturn]] void Fail(const MonitorPlan& plan, const Error& error) {
  Report(plan.ready_fd, error.ToString());
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
  UniqueFd console;
  if (plan.container.terminal) {
    if (plan.console_socket.empty())
      Fail(plan, Error::Field("--console-socket", "is required when process.terminal is true"));
    auto opened = OpenConsole(plan.console_socket);
    if (!opened) Fail(plan, opened.error());
    console = std::move(*opened);
    // The process's stdio is the pty: the create's own (which an engine may read to its end, as
    // docker's shim does) is let go, as runc's init lets it go.
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; fd < 3 && null >= 0; ++fd) dup2(null, fd);
    if (null > 2) close(null);
  }
  ContainerState state = plan.state;
  state.pid = getpid();
  state.pid_start = shared::ProcessStartTime(state.pid).value_or(0);
  if (auto network = PrepareNetwork(plan, state); !network) Fail(plan, network.error());
  auto backend = MakeBackend(plan.container.run.sandbox.backend);
  if (!backend) Fail(plan, backend.error());
  RunResult setup;
  std::unique_ptr<Session> session = (*backend)->Start(plan.container.run.sandbox, setup);
  if (!session) Fail(plan, Error{"start the sandbox", setup.error, 0});
  UniqueFd fifo(open(plan.dir.fifo().c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW));
  if (!fifo.valid()) Fail(plan, Error::Sys("open " + plan.dir.fifo()));
  WriteStatus(plan, state, ContainerStatus::kCreated);
  if (!Report(plan.ready_fd, "")) {
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
