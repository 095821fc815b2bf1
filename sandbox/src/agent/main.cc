// smolbox-agent: PID 1 of every namespace sandbox and /init of every microVM. It serves the
// host's exec requests over one channel, one at a time, until the host goes away.
//
//   smolbox-agent --channel-fd 3                 # ns backend: a socketpair end
//   smolbox-agent --channel-fd 3 --attach-fd 4   # and a listener for more (attach_point.h)
//   smolbox-agent --channel-path /dev/vport0p1   # a virtio-serial port
//   /init                                        # vm backend: started by the guest kernel
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <charconv>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "attach_point.h"
#include "connection.h"
#include "exec.h"
#include "exec_protocol.h"
#include "guest_boot.h"
#include "guest_restore.h"
#include "guest_run.h"
#include "pump.h"
#include "reaper.h"
#include "seccomp_policy.h"
#include "zygote.h"

namespace smolbox::agent {
namespace {

constexpr std::string_view kUsage =
    "usage: smolbox-agent --channel-fd N [--attach-fd N] | --channel-path PATH\n";

struct Options {
  std::optional<int> channel_fd;
  std::string channel_path;
  std::optional<int> attach_fd;
};

Expected<int> ParseFd(std::string_view flag, std::string_view value) {
  int fd = -1;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), fd);
  if (ec != std::errc() || end != value.data() + value.size() || fd < 0) {
    return std::unexpected(Error{std::string(flag), "is not a file descriptor", 0});
  }
  return fd;
}

Expected<Options> ParseArgs(std::span<char* const> args) {
  Options options;
  for (size_t i = 1; i < args.size(); i += 2) {
    std::string_view flag = args[i];
    if (i + 1 >= args.size()) return std::unexpected(Error{std::string(flag), "needs a value", 0});
    std::string_view value = args[i + 1];
    if (flag == "--channel-fd") {
      SMOLBOX_ASSIGN_OR_RETURN(options.channel_fd, ParseFd(flag, value));
    } else if (flag == "--attach-fd") {
      SMOLBOX_ASSIGN_OR_RETURN(options.attach_fd, ParseFd(flag, value));
    } else if (flag == "--channel-path") {
      options.channel_path = value;
    } else {
      return std::unexpected(Error{std::string(flag), "unknown option", 0});
    }
  }
  if (options.channel_fd.has_value() == !options.channel_path.empty()) {
    return std::unexpected(
        Error{"arguments", "need exactly one of --channel-fd, --channel-path", 0});
  }
  if (options.attach_fd && !options.channel_fd) {
    return std::unexpected(Error{"--attach-fd", "goes with --channel-fd only", 0});
  }
  return options;
}

Expected<UniqueFd> OpenChannel(const Options& options) {
  if (options.channel_fd) {
    // The workload never inherits the channel (close_range covers it too; this is the backstop).
    if (fcntl(*options.channel_fd, F_SETFD, FD_CLOEXEC) != 0) {
      return std::unexpected(Error::Sys(fmt::format("channel fd {}", *options.channel_fd)));
    }
    return UniqueFd(*options.channel_fd);
  }
  UniqueFd fd(open(options.channel_path.c_str(), O_RDWR | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid()) return std::unexpected(Error::Sys("open " + options.channel_path));
  return fd;
}

// Fds 0-2 must be taken, or a pipe could land there and a child's dup2 onto 0-2 would
// clobber one pipe with another. As /init of a VM they may well be closed.
void OccupyStdio() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    // open() returns the lowest free fd, which is this one.
    if (open("/dev/null", O_RDWR) < 0) open("/", O_RDONLY | O_DIRECTORY);
  }
}

Expected<void> HardenAgent() {
  // Not dumpable: a workload running as the agent's uid can neither ptrace it nor open
  // /proc/1/mem, where the channel and the host's requests are.
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
    return std::unexpected(Error::Sys("PR_SET_DUMPABLE"));
  // A workload that closes its pipes must cost a write an EPIPE, not the agent its life.
  if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) return std::unexpected(Error::Sys("signal(SIGPIPE)"));
  // Outside a pid namespace (the tests), orphans of the workload come back to the agent
  // rather than the host's init, so the agent reaps them as PID 1 would.
  if (getpid() != 1 && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
    return std::unexpected(Error::Sys("PR_SET_CHILD_SUBREAPER"));
  }
  OccupyStdio();
  return {};
}

class Agent {
 public:
  // guest: /init of a microVM, which takes one "setup" before its execs. attach, when given, is
  // served while this agent waits and while its execs run.
  Agent(Connection& connection, const ChildSignals& signals, const SeccompProgram& seccomp, bool guest,
        AttachPoint* attach = nullptr)
      : connection_(connection), signals_(signals), seccomp_(seccomp), guest_(guest), attach_(attach) {}

  // 0 when the host closed the channel, 1 on a channel error.
  int Serve() {
    if (auto sent = connection_.Send({{{"type", "ready"}}, ""}); !sent) return Fatal(sent.error());
    for (;;) {
      auto message = WaitForMessage();
      if (!message) return Fatal(message.error());
      if (!*message) break;
      Handle(**message);
    }
    KillWorkloads(0);  // nothing should be left between execs; as PID 1, make sure
    return 0;
  }

 private:
  // Blocks until a message or EOF (nullopt), reaping strays meanwhile: as PID 1 the agent
  // adopts every orphan in the sandbox.
  Expected<std::optional<channel::Message>> WaitForMessage() {
    for (;;) {
      auto next = connection_.Next();
      if (!next || *next || connection_.closed()) return next;
      std::array<pollfd, 3> fds{{{connection_.fd(), POLLIN, 0},
                                 {signals_.fd(), POLLIN, 0},
                                 {attach_ ? attach_->fd() : -1, POLLIN, 0}}};
      if (poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) {
        return std::unexpected(Error::Sys("poll"));
      }
      if (fds[1].revents != 0) {
        signals_.Drain();
        ReapExited(-1);
      }
      if (fds[2].revents != 0) attach_->AcceptOne();
      if (fds[0].revents != 0) {
        SMOLBOX_TRY(connection_.ReadAvailable());
      }
    }
  }

  void Handle(const channel::Message& message) {
    if (message.Type() == "exec") {
      Exec(message);
      return;
    }
    // A cancel, or stdin, that crossed its exec's exit: there is nothing left to take it.
    if (IsCancel(message) || IsStdinFrame(message)) return;
    if (message.Type() == "setup" && guest_ && !cgroup_) {
      SetUp(message);
      return;
    }
    if (message.Type() == "restored" && guest_ && !cgroup_) {
      Restored(message);
      return;
    }
    std::string error = fmt::format("unknown message type \"{}\"", message.Type());
    Reply({{{"type", "error"}, {"error", error}}, ""});
  }

  void SetUp(const channel::Message& message) {
    auto setup = DecodeGuestSetup(message);
    // The zygote's cgroup, made while the guest's cgroup tree is still in reach.
    Expected<WorkloadCgroup> prewarm = std::unexpected(Error{"prewarm", "not asked for", 0});
    if (setup && setup->prewarm == "python") {
      prewarm = WorkloadCgroup::Create(kGuestCgroupRoot, "prewarm", CgroupLimits{kZygoteMemoryBytes, kZygotePids, setup->cpus});
    }
    auto cgroup = setup ? SetUpGuestRun(*setup) : std::unexpected(setup.error());
    if (!cgroup) {
      const Error& e = cgroup.error();
      Reply({{{"type", "setup_error"}, {"where", e.where}, {"what", e.what}, {"errno", e.errnum}}, ""});
      return;
    }
    cgroup_.emplace(std::move(*cgroup));
    if (setup->prewarm == "python") StartZygote(*setup, std::move(prewarm));
    Reply({{{"type", "setup_done"}}, ""});
  }

  // Without its zygote a prewarmed sandbox still runs every exec, each as a plain one.
  void StartZygote(const GuestSetup& setup, Expected<WorkloadCgroup> cgroup) {
    auto zygote = cgroup ? PythonZygote::Start(setup, seccomp_, std::move(*cgroup), cgroup_->procs_fd()) : std::unexpected(cgroup.error());
    if (!zygote) {
      fmt::print(stderr, "smolbox-agent: prewarm: {}\n", zygote.error().ToString());
      return;
    }
    zygote_.emplace(std::move(*zygote));
    KillByCgroup(&*cgroup_);
  }

  // Only before "setup": a snapshot is taken before it, so a restore never follows a setup.
  void Restored(const channel::Message& message) {
    auto restore = DecodeGuestRestore(message);
    auto fresh = restore ? FreshenRestoredGuest(*restore) : std::unexpected(restore.error());
    if (!fresh) {
      const Error& e = fresh.error();
      Reply({{{"type", "restore_error"}, {"where", e.where}, {"what", e.what}, {"errno", e.errnum}}, ""});
      return;
    }
    Reply({{{"type", "restored_done"}}, ""});
  }

  void Exec(const channel::Message& message) {
    if (guest_ && !cgroup_) {
      ExecReport report;
      report.status = Status::kInternalError;
      report.error = "exec before setup";
      Reply(EncodeExit(report));
      return;
    }
    auto request = DecodeExec(message);
    if (!request) {
      ExecReport report;
      report.status = Status::kInternalError;
      report.error = request.error().ToString();
      Reply(EncodeExit(report));
      return;
    }
    CgroupCounters before = cgroup_ ? cgroup_->Read() : CgroupCounters{};
    CpuMeter cpu_meter;
    if (cgroup_) cpu_meter = [this, base = before.cpu_usec] { return (cgroup_->CpuUsec() - base) / 1000; };
    std::optional<std::expected<Workload, ExecReport>> forked;
    if (zygote_ && zygote_->Accepts(*request)) forked = zygote_->Spawn(*request, cgroup_->procs_fd());
    auto workload = forked ? std::move(*forked) : StartWorkload(*request, seccomp_, cgroup_ ? cgroup_->procs_fd() : -1);
    ExecReport report = workload ? PumpExec(connection_, signals_, *request, std::move(*workload), cpu_meter, attach_)
                                 : workload.error();
    if (cgroup_ && workload) cgroup_->Judge(before, report);
    Reply(EncodeExit(report));
  }

  void Reply(const channel::Message& message) {
    // A failed send closes the connection; the serve loop then sees EOF and ends.
    if (connection_.closed()) return;
    if (auto sent = connection_.Send(message); !sent) {
      fmt::print(stderr, "smolbox-agent: {}\n", sent.error().ToString());
    }
  }

  int Fatal(const Error& error) {
    fmt::print(stderr, "smolbox-agent: {}\n", error.ToString());
    KillWorkloads(0);
    return 1;
  }

  Connection& connection_;
  const ChildSignals& signals_;
  const SeccompProgram& seccomp_;
  bool guest_ = false;
  AttachPoint* attach_ = nullptr;
  std::optional<WorkloadCgroup> cgroup_;  // a guest's, once set up
  std::optional<PythonZygote> zygote_;    // with setup's prewarm, once started
};

int StartupFailure(const Error& error) {
  fmt::print(stderr, "smolbox-agent: {}\n", error.ToString());
  return 1;
}

// The agent forked for one attached connection (attach_point.h): the same loop, on its own
// channel, with no attach point of its own.
int ServeAttached(UniqueFd channel, const SeccompProgram& seccomp) {
  auto signals = ChildSignals::Create();
  if (!signals) return StartupFailure(signals.error());
  Connection connection(std::move(channel));
  return Agent(connection, *signals, seccomp, false).Serve();
}

// /init of a microVM: boot, serve the host, power off. Returning from init would panic the
// kernel, so every way out ends the VM.
int GuestMain() {
  auto channel = BootGuest();
  if (!channel) {
    fmt::print(stderr, "smolbox-agent: boot: {}\n", channel.error().ToString());
    PowerOff();
  }
  if (auto hardened = HardenAgent(); !hardened) {
    StartupFailure(hardened.error());
    PowerOff();
  }
  auto signals = ChildSignals::Create();
  auto seccomp = signals ? CompileSeccompPolicy() : std::unexpected(signals.error());
  if (!seccomp) {
    StartupFailure(seccomp.error());
    PowerOff();
  }
  // "ready" is the boot snapshot's point (src/vm/snapshot.h): nothing before it reads
  // /proc/sys/kernel/random/boot_id, which the kernel makes on the first read, so each
  // restored VM makes its own.
  if (auto reseeded = ReseedCrng(); !reseeded) StartupFailure(reseeded.error());
  Connection connection(std::move(*channel));
  Agent(connection, *signals, *seccomp, true).Serve();
  PowerOff();
}

int Main(std::span<char* const> args) {
  if (StartedAsGuestInit(static_cast<int>(args.size()))) return GuestMain();
  auto options = ParseArgs(args);
  if (!options) {
    fmt::print(stderr, "smolbox-agent: {}\n{}", options.error().ToString(), kUsage);
    return 2;
  }
  if (auto hardened = HardenAgent(); !hardened) return StartupFailure(hardened.error());
  auto channel = OpenChannel(*options);
  if (!channel) return StartupFailure(channel.error());
  auto signals = ChildSignals::Create();
  if (!signals) return StartupFailure(signals.error());
  // Compiled once, before any fork; an agent without its policy refuses to start.
  auto seccomp = CompileSeccompPolicy();
  if (!seccomp) return StartupFailure(seccomp.error());
  Connection connection(std::move(*channel));
  std::optional<AttachPoint> attach;
  if (options->attach_fd) {
    if (fcntl(*options->attach_fd, F_SETFD, FD_CLOEXEC) != 0) {
      return StartupFailure(Error::Sys(fmt::format("attach fd {}", *options->attach_fd)));
    }
    attach.emplace(UniqueFd(*options->attach_fd),
                   [&seccomp](UniqueFd side) { return ServeAttached(std::move(side), *seccomp); });
  }
  return Agent(connection, *signals, *seccomp, false, attach ? &*attach : nullptr).Serve();
}

}  // namespace
}  // namespace smolbox::agent

int main(int argc, char** argv) {
  return smolbox::agent::Main(std::span<char* const>(argv, static_cast<size_t>(argc)));
}
