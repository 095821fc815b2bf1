#include "keeper.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <memory>

#include <fmt/format.h>

#include "agent_session.h"
#include "control_protocol.h"
#include "fd_passing.h"
#include "sandbox_state.h"
#include "smolbox/backend.h"
#include "state.h"

namespace smolbox::persist {
namespace {

using shared::SetupFailure;

constexpr int kListenBacklog = 8;
// A client that connects must send its request promptly; it cannot stall the keeper.
constexpr int kRequestTimeoutSec = 10;
// A request is an exec's argv and env at most: the channel's header bound holds them.
constexpr uint32_t kMaxRequestBytes = channel::kMaxHeaderBytes + 1024;

std::string NowIso8601() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

Expected<UniqueFd> Listen(int dir_fd) {
  auto control = NewControlSocket(dir_fd);
  SMOLBOX_TRY(control);
  // The directory is 0700: only this user can reach the socket; peers are checked on accept too.
  if (bind(control->fd.get(), reinterpret_cast<sockaddr*>(&control->address), sizeof control->address) != 0) {
    return std::unexpected(Error::Sys("bind the control socket"));
  }
  if (listen(control->fd.get(), kListenBacklog) != 0) return std::unexpected(Error::Sys("listen on the control socket"));
  return std::move(control->fd);
}

// SIGTERM, SIGINT and SIGHUP end the keeper cleanly, between requests.
Expected<UniqueFd> StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, sig);
  if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0) return std::unexpected(Error::Sys("sigprocmask"));
  UniqueFd fd(signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!fd.valid()) return std::unexpected(Error::Sys("signalfd"));
  return fd;
}

// Watches the sandbox's directory, where clients find the keeper. Removed or emptied of its
// control socket (an operator's `rm -rf /run/smolbox`, a cleaner), the sandbox can no longer be
// reached, not even by `smolbox rm`: the keeper must then end it rather than live on unseen.
Expected<UniqueFd> WatchOwnDir(int dir_fd) {
  UniqueFd fd(inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  if (!fd.valid()) return std::unexpected(Error::Sys("inotify_init1"));
  std::string dir = fmt::format("/proc/self/fd/{}", dir_fd);
  constexpr uint32_t kEvents = IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
  if (inotify_add_watch(fd.get(), dir.c_str(), kEvents) < 0) {
    return std::unexpected(Error::Sys("watch the sandbox's directory"));
  }
  return fd;
}

// Why the watched directory no longer leads to this keeper, from the events waiting on fd;
// empty when it still does.
std::string OwnDirGone(int watch_fd) {
  alignas(inotify_event) char buffer[4096];
  ssize_t n;
  while ((n = read(watch_fd, buffer, sizeof buffer)) > 0) {
    for (ssize_t at = 0; at < n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      if (event->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT)) {
        return "its state directory was removed or moved";
      }
      if (event->len > 0 && std::string_view(event->name) == kControlSocket) {
        return "its control socket was removed";
      }
    }
  }
  return "";
}

bool PeerIsOurUser(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == geteuid();
}

class Keeper {
 public:
  Keeper(int dir_fd, ExecSpec defaults, std::unique_ptr<Session> session, UniqueFd listener, UniqueFd signals,
         UniqueFd dir_watch, int lifeline_fd)
      : dir_fd_(dir_fd), defaults_(std::move(defaults)), session_(std::move(session)), listener_(std::move(listener)),
        signals_(std::move(signals)), dir_watch_(std::move(dir_watch)), lifeline_fd_(lifeline_fd) {}

  // Serves until stopped, or until the sandbox dies, or its lifeline's holder does.
  void Serve() {
    for (;;) {
      // poll ignores a negative fd: without a lifeline, the fourth entry never fires.
      pollfd fds[5] = {{listener_.get(), POLLIN, 0}, {session_->death_fd(), POLLIN, 0}, {signals_.get(), POLLIN, 0},
                       {lifeline_fd_, POLLIN, 0}, {dir_watch_.get(), POLLIN, 0}};
      if (poll(fds, 5, -1) < 0) {
        if (errno == EINTR) continue;
        return Die(fmt::format("its keeper failed to poll: {}", strerror(errno)));
      }
      if (fds[1].revents != 0) return Die(session_->DeathReason());
      if (fds[2].revents != 0) {
        signalfd_siginfo info{};
        (void)!read(signals_.get(), &info, sizeof info);
        return Die(fmt::format("its keeper was stopped by signal {} ({})", info.ssi_signo, strsignal(static_cast<int>(info.ssi_signo))));
      }
      if (fds[3].revents != 0) return Die("the server that created it went away");
      if (fds[4].revents != 0) {
        // Nothing is written into a directory that is being removed: a `dead` file would make
        // the remover's last rmdir fail. ls then says the keeper is gone.
        if (std::string gone = OwnDirGone(dir_watch_.get()); !gone.empty()) return Die(gone, Record::kNo);
      }
      if (fds[0].revents != 0 && !Accept()) return;
    }
  }

 private:
  // False once the keeper should exit (a stop was served).
  bool Accept() {
    UniqueFd client(accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!client.valid() || !PeerIsOurUser(client.get())) return true;
    timeval timeout{kRequestTimeoutSec, 0};
    setsockopt(client.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    auto message = shared::ReceiveWithFds(client.get(), kMaxRequestBytes);
    if (!message) return true;
    const auto& [m, fds] = *message;
    if (m.Type() == "stop") {
      session_.reset();
      unlinkat(dir_fd_, kControlSocket, 0);
      (void)channel::WriteMessage(client.get(), {{{"type", "stopped"}}, ""});
      return false;
    }
    RunResult result;
    if (m.Type() != "exec") {
      result = SetupFailure(result, Error{"request", fmt::format("unknown request {:?}", m.Type()), 0});
    } else {
      result = Exec(m, fds, client.get());
    }
    // A client that went away meanwhile costs nothing but this write's EPIPE.
    (void)SendResult(client.get(), result);
    return true;
  }

  // The client sends nothing more during its exec: readable means it went away (Ctrl-C, a
  // kill), and then so does the workload. Its stdio came as descriptors with the order.
  RunResult Exec(const channel::Message& message, const std::vector<UniqueFd>& fds, int client_fd) {
    auto order = DecodeExecOrder(message);
    if (!order) return SetupFailure({}, order.error());
    if (fds.size() != order->fd_count()) {
      return SetupFailure({}, Error{"request", fmt::format("came with {} descriptors, not the {} it names", fds.size(),
                                                           order->fd_count()), 0});
    }
    ExecIo io;
    size_t next = 0;
    if (order->sends_stdin) io.stdin_fd = fds[next++].get();
    if (order->streams_output) {
      io.stdout_fd = fds[next++].get();
      io.stderr_fd = fds[next++].get();
    }
    ExecSpec spec = defaults_;
    spec.argv = order->argv;
    for (const auto& [key, value] : order->env) spec.env.insert_or_assign(key, value);
    if (order->workdir) spec.workdir = *order->workdir;
    if (order->timeout_ms) spec.limits.timeout_ms = *order->timeout_ms;
    if (auto ok = ValidateExecSpec(spec); !ok) return SetupFailure({}, ok.error());
    return session_->Exec(spec, io, client_fd);
  }

  // Marked dead and closed to requests first: a teardown (a VM's power-off) takes a moment,
  // during which ls must not call the sandbox running nor exec reach it.
  enum class Record { kYes, kNo };
  void Die(const std::string& reason, Record record = Record::kYes) {
    if (record == Record::kYes) (void)WriteDeathReason(dir_fd_, reason + "\n");
    listener_.Reset();
    unlinkat(dir_fd_, kControlSocket, 0);
    session_.reset();
  }

  int dir_fd_;
  ExecSpec defaults_;  // what each exec's order adds to and overrides
  std::unique_ptr<Session> session_;
  UniqueFd listener_;
  UniqueFd signals_;
  UniqueFd dir_watch_;
  int lifeline_fd_;  // -1 when none
};

void ReportToCreator(int report_fd, const std::string& type, const RunResult& result) {
  nlohmann::json header = ToJson(result);
  header["type"] = type;
  (void)channel::WriteMessage(report_fd, {header, ""});
}

// The keeper's life, in the forked child. Reports "created" or "failed" on report_fd.
int KeeperMain(int dir_fd, const SandboxSpec& spec, const ExecSpec& defaults, UniqueFd report, int lifeline_fd) {
  signal(SIGPIPE, SIG_IGN);
  RunResult setup;
  auto backend = MakeBackend(spec.backend);
  if (!backend) {
    ReportToCreator(report.get(), "failed", SetupFailure(setup, backend.error()));
    return 1;
  }
  std::unique_ptr<Session> session = (*backend)->Start(spec, setup);
  if (!session) {
    ReportToCreator(report.get(), "failed", setup);
    return 1;
  }
  // Blocked only now: the agent and QEMU, started above, must not inherit a blocked mask. A
  // signal before this ends the keeper, and the creator cleans up after it.
  auto signals = StopSignals();
  if (!signals) {
    ReportToCreator(report.get(), "failed", SetupFailure(setup, signals.error()));
    return 1;
  }
  auto dir_watch = WatchOwnDir(dir_fd);
  if (!dir_watch) {
    ReportToCreator(report.get(), "failed", SetupFailure(setup, dir_watch.error()));
    return 1;
  }
  auto listener = Listen(dir_fd);
  auto start = shared::ProcessStartTime(getpid());
  if (!listener || !start) {
    ReportToCreator(report.get(), "failed", SetupFailure(setup, listener ? start.error() : listener.error()));
    return 1;
  }
  KeeperInfo info{setup.backend, setup.isolation, NowIso8601(), getpid(), *start, defaults.limits.timeout_ms};
  if (auto ok = WriteInfo(dir_fd, info); !ok) {
    ReportToCreator(report.get(), "failed", SetupFailure(setup, ok.error()));
    return 1;
  }
  setup.status = Status::kExited;
  setup.exit_code = 0;
  ReportToCreator(report.get(), "created", setup);
  report.Reset();
  Keeper(dir_fd, defaults, std::move(session), std::move(*listener), std::move(*signals), std::move(*dir_watch),
         lifeline_fd)
      .Serve();
  return 0;
}

// The keeper must not hold the creator's terminal or pipes: a caller reading the CLI's output
// to EOF would otherwise wait for the sandbox's whole life.
void Detach() {
  setsid();
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  for (int fd = 0; fd <= 2; ++fd) dup2(null, fd);
  if (null > 2) close(null);
}

// The new sandbox's directory, and its lock, which the creator holds until the sandbox is ready.
struct NewSandboxDir {
  UniqueFd dir;
  UniqueFd lock;
};

Expected<NewSandboxDir> MakeSandboxDir(const std::string& name) {
  SMOLBOX_TRY(ValidateName(name));
  SMOLBOX_ASSIGN_OR_RETURN(auto sandboxes, SandboxesDir());
  std::string path = sandboxes + "/" + name;
  if (mkdir(path.c_str(), 0700) != 0) {
    if (errno == EEXIST) {
      return std::unexpected(Error{"name", fmt::format("a sandbox named {:?} already exists (smolbox ls; smolbox rm {})", name, name), 0});
    }
    return std::unexpected(Error::Sys("mkdir " + path));
  }
  auto dir = OpenSandboxDir(name);
  auto lock = dir ? TryLock(dir->get()) : std::unexpected(dir.error());
  if (!lock || !lock->valid()) {
    if (dir) (void)RemoveSandboxDir(name);
    return std::unexpected(lock ? Error{"name", "the new sandbox's lock is taken", 0} : lock.error());
  }
  return NewSandboxDir{std::move(*dir), std::move(*lock)};
}

// Forks the keeper and waits for its report. On failure nothing is left: the keeper is
// collected, and whatever it made is removed with the directory.
Expected<RunResult> StartKeeper(const std::string& name, NewSandboxDir& sandbox, const SandboxSpec& spec,
                                const ExecSpec& defaults, int lifeline_fd) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    (void)RemoveSandboxDir(name);
    return std::unexpected(Error::Sys("pipe"));
  }
  UniqueFd report_read(pipe_fds[0]);
  UniqueFd report_write(pipe_fds[1]);
  std::fflush(nullptr);
  pid_t keeper = fork();
  if (keeper < 0) {
    (void)RemoveSandboxDir(name);
    return std::unexpected(Error::Sys("fork the keeper"));
  }
  if (keeper == 0) {
    report_read.Reset();
    // The creator holds the lock until the sandbox is ready; this copy must not keep it after.
    sandbox.lock.Reset();
    Detach();
    _exit(KeeperMain(sandbox.dir.get(), spec, defaults, std::move(report_write), lifeline_fd));
  }
  report_write.Reset();
  auto message = channel::ReadMessage(report_read.get());
  if (message && *message && (*message)->Type() == "created") {
    auto result = ResultFromJson((*message)->header);
    if (result) return *result;
  }
  // The keeper failed (and exits) or died: collect it, then everything it may have left.
  while (waitpid(keeper, nullptr, 0) < 0 && errno == EINTR) {
  }
  shared::SweepStaleRuns();
  (void)RemoveSandboxDir(name);
  if (message && *message) {
    auto result = ResultFromJson((*message)->header);
    if (result) return *result;
  }
  return std::unexpected(Error{"create", "the sandbox's keeper died while starting it", 0});
}

}  // namespace

RunResult CreateSandbox(const std::string& name, const SandboxSpec& spec, const ExecSpec& exec_defaults,
                        int lifeline_fd) {
  auto sandbox = MakeSandboxDir(name);
  auto result =
      sandbox ? StartKeeper(name, *sandbox, spec, exec_defaults, lifeline_fd) : std::unexpected(sandbox.error());
  return result ? *result : SetupFailure({}, result.error());
}

}  // namespace smolbox::persist
