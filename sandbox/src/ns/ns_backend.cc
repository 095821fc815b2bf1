#include "ns_backend.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>

#include <fmt/format.h>

#include "agent_binary.h"
#include "cgroup.h"
#include "contain.h"
#include "copyback.h"
#include "exec_protocol.h"
#include "fd_passing.h"
#include "monitor.h"
#include "state.h"
#include "storage.h"
#include "user.h"

namespace smolbox::ns {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kSetupTimeoutMs = 30000;
constexpr int64_t kMaxStdinBytes = 64 << 20;
constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

int64_t MsSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

// A volume source, opened by the runtime: rw volumes are copied in and back through this fd;
// ro ones are opened again by the sandbox's setup, since a bind source must belong to the
// setup's own mount namespace.
struct HostVolume {
  const Mount* mount;
  UniqueFd fd;
  size_t storage_index = 0;  // rw only: which storage vol<N> holds its copy
};

// Everything one run holds; destroyed in reverse order of declaration.
struct Sandbox {
  std::optional<RunDir> dir;
  std::optional<Cgroup> cgroup;
  Identity identity;
  std::vector<HostVolume> volumes;
  std::optional<Storage> storage;
  UniqueFd agent;
  UniqueFd channel;
  UniqueFd pidfd;
  pid_t pid = -1;

  ~Sandbox() {
    if (pidfd.valid()) syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
    if (pid > 0) while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {}
  }
};

// The storage is mounted in a mount namespace of the runtime's own, which the sandbox's copies;
// the host never sees it, and it vanishes with this process however it ends.
Expected<void> EnterPrivateMountNamespace() {
  static bool entered = false;
  if (entered) return {};
  if (unshare(CLONE_NEWNS) != 0) return std::unexpected(Error::Sys("unshare CLONE_NEWNS"));
  // Slave: host mounts still appear here, nothing of ours goes back.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) {
    return std::unexpected(Error::Sys("mount --make-rslave /"));
  }
  entered = true;
  return {};
}

Expected<void> OpenVolumes(const RunSpec& spec, Sandbox& box) {
  size_t rw = 0;
  for (size_t i = 0; i < spec.mounts.size(); ++i) {
    const Mount& m = spec.mounts[i];
    int flags = m.read_only ? O_PATH | O_CLOEXEC : O_RDONLY | O_DIRECTORY | O_CLOEXEC;
    UniqueFd fd(open(m.source.c_str(), flags));
    if (!fd.valid()) {
      std::string why = !m.read_only && errno == ENOTDIR ? "a rw volume must be a directory" : strerror(errno);
      return std::unexpected(Error{fmt::format("mounts[{}].source", i), fmt::format("{}: {}", m.source, why), 0});
    }
    box.volumes.push_back(HostVolume{&m, std::move(fd), m.read_only ? 0 : rw++});
  }
  return {};
}

size_t RwCount(const Sandbox& box) {
  size_t n = 0;
  for (const auto& v : box.volumes) n += v.mount->read_only ? 0 : 1;
  return n;
}

Expected<void> FillStorage(const RunSpec& spec, Sandbox& box, RunResult& result) {
  if (auto ok = box.storage->MakeLayout(box.identity.host_uid, box.identity.host_gid, RwCount(box)); !ok) return ok;
  int64_t budget = spec.limits.storage_mib << 20;
  for (size_t i = 0; i < box.volumes.size(); ++i) {
    const HostVolume& v = box.volumes[i];
    if (v.mount->read_only) continue;
    std::string name = Storage::VolumeDir(v.storage_index);
    UniqueFd to(openat(box.storage->root_fd(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    std::vector<std::string> dropped;
    auto ok = CopyIn(v.fd.get(), to.get(), Owner{box.identity.host_uid, box.identity.host_gid}, &budget, &dropped);
    if (!ok) return std::unexpected(Error{fmt::format("mounts[{}]", i), ok.error().ToString(), 0});
    for (const auto& d : dropped) result.Warn(fmt::format("mounts[{}]: {} into the sandbox", i, d));
  }
  return {};
}

ContainPlan MakePlan(const RunSpec& spec, const Sandbox& box, int child_channel) {
  ContainPlan plan;
  plan.identity = box.identity;
  plan.channel_fd = child_channel;
  plan.agent_fd = box.agent.get();
  plan.storage_mib = spec.limits.storage_mib;
  plan.root.newroot = box.dir->RootMountpoint();
  if (spec.image != "host") plan.root.image = spec.image;
  plan.root.workdir = spec.workdir;
  plan.root.uid = box.identity.uid;
  plan.root.gid = box.identity.gid;
  if (box.storage) plan.root.storage = box.storage->mountpoint();
  else plan.tmpfs_storage_mountpoint = box.dir->path() + "/storage";
  for (const auto& v : box.volumes) {
    plan.root.volumes.push_back(VolumeBind{v.mount->target, v.mount->read_only, v.mount->source, -1,
                                           Storage::VolumeDir(v.storage_index)});
  }
  std::sort(plan.root.volumes.begin(), plan.root.volumes.end(),
            [](const VolumeBind& a, const VolumeBind& b) { return a.target < b.target; });
  return plan;
}

Expected<void> StartSandbox(const RunSpec& spec, Sandbox& box) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return std::unexpected(Error::Sys("socketpair"));
  box.channel.Reset(pair[0]);
  UniqueFd child_end(pair[1]);
  ContainPlan plan = MakePlan(spec, box, child_end.get());
  int pidfd = -1;
  unsigned long flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
                        CLONE_NEWUTS | CLONE_PIDFD | SIGCHLD;
  // Raw clone without CLONE_VM forks: the child runs on a copy of this stack.
  long pid = syscall(SYS_clone, flags, nullptr, &pidfd, nullptr, 0);
  if (pid < 0) return std::unexpected(Error::Sys("clone with new namespaces"));
  if (pid == 0) {
    // Our copy of the runtime's end must go, or a dead runtime would never read as EOF here.
    close(box.channel.Release());
    ContainAndExecAgent(std::move(plan));
  }
  box.pid = static_cast<pid_t>(pid);
  box.pidfd.Reset(pidfd);
  if (auto ok = box.cgroup->AddProcess(box.pid); !ok) return ok;
  if (auto ok = WriteIdMaps(box.pid, box.identity); !ok) return ok;
  return channel::WriteMessage(box.channel.get(), channel::Message{{{"type", "go"}}, ""});
}

// The next setup message, bounded in time: a setup that hangs must not hang the runtime.
Expected<std::pair<channel::Message, UniqueFd>> AwaitSetup(const Sandbox& box) {
  pollfd fds[2] = {{box.channel.get(), POLLIN, 0}, {box.pidfd.get(), POLLIN, 0}};
  int rc = poll(fds, 2, kSetupTimeoutMs);
  if (rc == 0) return std::unexpected(Error{"setup", "the sandbox did not start within 30 s", ETIMEDOUT});
  if (!(fds[0].revents & POLLIN)) return std::unexpected(Error{"setup", "the sandbox's setup died", 0});
  auto got = ReceiveWithFd(box.channel.get());
  if (!got) return got;
  if (got->first.Type() == "setup_error") {
    const auto& h = got->first.header;
    return std::unexpected(Error{h.value("where", "setup"), h.value("what", ""), h.value("errno", 0)});
  }
  return got;
}

Expected<void> AwaitReady(const RunSpec& spec, Sandbox& box, RunResult& result) {
  auto message = AwaitSetup(box);
  if (!message) return std::unexpected(message.error());
  if (message->first.Type() == "storage") {
    // Rootless: the setup mounted its tmpfs and sent it; lay it out and fill it, then go on.
    box.storage.emplace(Storage::Adopt(std::move(message->second)));
    if (auto ok = FillStorage(spec, box, result); !ok) return ok;
    if (auto ok = channel::WriteMessage(box.channel.get(), channel::Message{{{"type", "go"}}, ""}); !ok) return ok;
    message = AwaitSetup(box);
    if (!message) return std::unexpected(message.error());
  }
  if (message->first.Type() != "ready") {
    return std::unexpected(Error{"setup", "unexpected message \"" + message->first.Type() + "\"", 0});
  }
  return {};
}

Expected<std::string> ReadStdin(const RunSpec& spec) {
  if (spec.stdin_data) return *spec.stdin_data;
  if (!spec.stdin_file) return std::string();
  UniqueFd fd(open(spec.stdin_file->c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::unexpected(Error{"stdin_file", *spec.stdin_file + ": " + strerror(errno), 0});
  std::string data;
  char buffer[65536];
  for (ssize_t n; (n = read(fd.get(), buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::unexpected(Error::Sys("read " + *spec.stdin_file));
    data.append(buffer, static_cast<size_t>(n));
    if (static_cast<int64_t>(data.size()) > kMaxStdinBytes) {
      return std::unexpected(Error{"stdin_file", "larger than 64 MiB", 0});
    }
  }
  return data;
}

ExecRequest MakeRequest(const RunSpec& spec, const Sandbox& box, std::string stdin_data) {
  ExecRequest r;
  r.argv = spec.argv;
  r.env = {{"PATH", kDefaultPath}, {"HOME", spec.workdir}, {"LANG", "C.UTF-8"}};
  for (const auto& [k, v] : spec.env) r.env[k] = v;
  r.cwd = spec.workdir;
  r.uid = box.identity.uid;
  r.gid = box.identity.gid;
  r.timeout_ms = spec.limits.timeout_ms;
  r.cpu_ms = spec.limits.cpu_ms.value_or(0);
  r.output_bytes = spec.limits.output_bytes;
  r.files = spec.limits.files;
  // Weaker stand-ins where no cgroup holds the limit; the result warns about each.
  if (!box.cgroup->holds_memory()) r.memory_bytes = spec.limits.memory_mib << 20;
  if (!box.cgroup->holds_pids()) r.nproc = spec.limits.pids;
  r.stdin_data = std::move(stdin_data);
  return r;
}

void WarnWeakLimits(const Sandbox& box, RunResult& result) {
  const Cgroup& cg = *box.cgroup;
  for (const auto& problem : cg.problems()) result.Warn("cgroup: " + problem);
  if (!cg.holds_memory()) result.Warn("memory: no cgroup; enforced per process by RLIMIT_DATA only");
  if (!cg.holds_pids()) result.Warn("pids: no cgroup; enforced per user by RLIMIT_NPROC only");
  if (!cg.holds_cpu()) result.Warn("cpus: no cgroup; the CPU share is not limited");
  if (box.storage && !box.storage->disk_backed()) {
    result.Warn("storage: a size-capped tmpfs (disk-backed storage needs root); it uses RAM");
  }
}

void Classify(const MonitorOutcome& outcome, const Sandbox& box, RunResult& result) {
  const Cgroup& cg = *box.cgroup;
  bool oom = cg.OomKills() > 0;
  if (outcome.report) {
    const ExecReport& r = *outcome.report;
    result.status = r.status;
    result.exit_code = r.exit_code;
    result.signal = r.signal;
    result.usage = Usage{r.wall_ms, r.cpu_ms, r.peak_memory_bytes};
    if (r.status == Status::kSignaled && r.signal == SIGKILL && oom) result.status = Status::kMemoryLimit;
    if (r.status == Status::kSetupError || r.status == Status::kInternalError) result.error = r.error;
  } else if (outcome.backstop_fired) {
    result.status = Status::kTimeout;
    result.signal = SIGKILL;
    result.Warn("timeout: the agent did not end the run; the host backstop killed the sandbox");
  } else if (outcome.cpu_limit_fired) {
    result.status = Status::kCpuLimit;
    result.signal = SIGKILL;
  } else if (outcome.output_overflow) {
    result.status = Status::kOutputLimit;
    result.signal = SIGKILL;
  } else if (oom) {
    result.status = Status::kMemoryLimit;
    result.signal = SIGKILL;
  } else {
    result.status = Status::kInternalError;
    result.error = outcome.error;
  }
  if (auto cpu = cg.CpuUsageMs()) result.usage.cpu_ms = std::max(result.usage.cpu_ms, *cpu);
  result.usage.peak_memory_bytes = std::max(result.usage.peak_memory_bytes, cg.PeakMemoryBytes());
}

void CopyBackVolumes(const RunSpec& spec, const Sandbox& box, RunResult& result) {
  if (!box.storage) return;
  for (size_t i = 0; i < box.volumes.size(); ++i) {
    const HostVolume& v = box.volumes[i];
    if (v.mount->read_only) continue;
    std::string name = Storage::VolumeDir(v.storage_index);
    UniqueFd from(openat(box.storage->root_fd(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat host{};
    fstat(v.fd.get(), &host);
    std::vector<std::string> dropped;
    auto ok = from.valid() ? CopyBack(from.get(), v.fd.get(), Owner{host.st_uid, host.st_gid},
                                      spec.limits.storage_mib << 20, &dropped)
                           : std::unexpected(Error{"storage", "the volume's copy is gone", 0});
    for (const auto& d : dropped) result.Warn(fmt::format("mounts[{}]: {} back to the host", i, d));
    if (!ok) result.Warn(fmt::format("mounts[{}]: copy-back stopped: {}", i, ok.error().ToString()));
  }
}

void StopAgent(Sandbox& box) {
  // Closing the channel tells the agent to end; it kills what is left in the namespace.
  shutdown(box.channel.get(), SHUT_RDWR);
  pollfd fd{box.pidfd.get(), POLLIN, 0};
  if (poll(&fd, 1, 1000) <= 0) syscall(SYS_pidfd_send_signal, box.pidfd.get(), SIGKILL, nullptr, 0);
  while (waitpid(box.pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  box.pid = -1;
  box.cgroup->KillAll();
}

Expected<void> Prepare(const RunSpec& spec, Sandbox& box, RunResult& result) {
  box.identity = PlanIdentity(spec.user);
  if (auto ok = OpenVolumes(spec, box); !ok) return ok;
  auto dir = RunDir::Create();
  if (!dir) return std::unexpected(dir.error());
  box.dir.emplace(std::move(*dir));
  // One more pid than asked: the agent itself lives in the cgroup.
  box.cgroup.emplace(Cgroup::Create(box.dir->id(), {spec.limits.memory_mib << 20, spec.limits.cpus,
                                                    spec.limits.pids + 1}));
  if (!box.identity.rootless) {
    if (auto ok = EnterPrivateMountNamespace(); !ok) return ok;
    auto storage = Storage::CreateDisk(spec.limits.storage_mib, box.dir->path() + "/storage");
    if (!storage) return std::unexpected(storage.error());
    box.storage.emplace(std::move(*storage));
    if (auto ok = FillStorage(spec, box, result); !ok) return ok;
  } else if (mkdir((box.dir->path() + "/storage").c_str(), 0700) != 0) {
    return std::unexpected(Error::Sys("mkdir storage mountpoint"));
  }
  auto agent_path = FindAgent();
  if (!agent_path) return std::unexpected(agent_path.error());
  auto agent = SealedAgentCopy(*agent_path);
  if (!agent) return std::unexpected(agent.error());
  box.agent = std::move(*agent);
  if (auto ok = StartSandbox(spec, box); !ok) return ok;
  return AwaitReady(spec, box, result);
}

class NsBackend final : public Backend {
 public:
  RunResult Run(const RunSpec& spec) override {
    RunResult result;
    result.backend = "ns";
    result.isolation = "namespaces";
    auto start = Clock::now();
    SweepStaleRuns();
    Sandbox box;
    auto stdin_data = ReadStdin(spec);
    auto ready = stdin_data ? Prepare(spec, box, result) : std::unexpected(stdin_data.error());
    if (box.cgroup) WarnWeakLimits(box, result);
    if (!ready) {
      result.status = Status::kSetupError;
      result.error = ready.error().ToString();
      result.timings.setup_ms = MsSince(start);
      return result;
    }
    result.timings.setup_ms = MsSince(start);
    auto run_start = Clock::now();
    ExecRequest request = MakeRequest(spec, box, std::move(*stdin_data));
    MonitorOutcome outcome;
    if (auto sent = channel::WriteMessage(box.channel.get(), EncodeExec(request)); !sent) {
      outcome.error = sent.error().ToString();
    } else {
      outcome = MonitorExec(box.channel.get(), box.pidfd.get(), request, *box.cgroup);
    }
    result.timings.run_ms = MsSince(run_start);
    auto teardown_start = Clock::now();
    StopAgent(box);
    Classify(outcome, box, result);
    result.stdout_data = std::move(outcome.stdout_data);
    result.stderr_data = std::move(outcome.stderr_data);
    result.stdout_truncated = outcome.stdout_truncated || (outcome.report && outcome.report->stdout_truncated);
    result.stderr_truncated = outcome.stderr_truncated || (outcome.report && outcome.report->stderr_truncated);
    if (box.cgroup->PidsLimitHit()) result.limits_hit.push_back("pids");
    if (box.storage && box.storage->Full()) result.limits_hit.push_back("storage");
    CopyBackVolumes(spec, box, result);
    result.timings.teardown_ms = MsSince(teardown_start);
    return result;
  }
};

}  // namespace

std::unique_ptr<Backend> MakeNsBackend() { return std::make_unique<NsBackend>(); }

}  // namespace smolbox::ns
