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
#include "agent_session.h"
#include "attach_socket.h"
#include "cgroup.h"
#include "contain.h"
#include "fd_passing.h"
#include "gateway.h"
#include "idmapped_image.h"
#include "json_bounds.h"
#include "mutant.h"
#include "net.h"
#include "state.h"
#include "storage.h"
#include "user.h"
#include "workspace.h"

namespace smolbox::ns {
namespace {

using confine::Identity;
using confine::VolumeBind;
using shared::Cgroup;
using shared::HostVolume;
using shared::RunDir;
using shared::Storage;
using Clock = std::chrono::steady_clock;

constexpr int64_t kSetupTimeoutMs = 30000;
// Setup messages are small: a storage hand-off, a list of warnings.
constexpr uint32_t kMaxSetupFrameBytes = 1 << 20;
// How long a stopped agent may take to end the workload before it is killed.
constexpr int kStopWaitMs = 1000;

int64_t MsSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

// Everything one run holds; destroyed in reverse order of declaration.
struct Sandbox {
  SandboxSpec spec;  // the volumes point into its mounts
  std::optional<RunDir> dir;
  std::optional<Cgroup> cgroup;
  Identity identity;
  std::vector<HostVolume> volumes;
  std::optional<Storage> storage;
  std::optional<net::Uplink> uplink;  // with egress: opened first, so a bad one fails early
  std::unique_ptr<net::Gateway> gateway;
  bool image_idmapped = false;  // the image is mounted at dir/image (idmapped_image.h)
  UniqueFd agent;
  UniqueFd attach;  // with spec.attach_socket: its listener, which the agent serves
  UniqueFd channel;
  UniqueFd pidfd;
  pid_t pid = -1;

  ~Sandbox() { shared::KillAndReap(pidfd.get(), pid); }
};

ContainPlan MakePlan(const SandboxSpec& spec, const Sandbox& box, int child_channel) {
  ContainPlan plan;
  plan.identity = box.identity;
  plan.channel_fd = child_channel;
  plan.agent_fd = box.agent.get();
  plan.storage_mib = spec.limits.storage_mib;
  plan.root.newroot = box.dir->RootMountpoint();
  if (spec.image != "host") plan.root.image = box.image_idmapped ? box.dir->path() + "/image" : spec.image;
  plan.root.workdir = spec.workdir;
  plan.root.uid = box.identity.uid;
  plan.root.gid = box.identity.gid;
  plan.root.hide_host_paths = true;
  plan.egress = spec.egress.policy.Enabled();
  if (plan.egress) plan.root.resolver = confine::kEgressResolver;
  plan.root.ca_bundle = spec.ca_bundle;
  if (spec.writable_root) plan.root.writable_root_mib = spec.limits.storage_mib;
  plan.hostname = spec.hostname;
  plan.engine_netns = !spec.network_namespace.empty();
  plan.attach_fd = box.attach.get();
  plan.root.files = spec.root_files;
  if (box.storage) plan.root.storage = box.storage->mountpoint();
  else plan.tmpfs_storage_mountpoint = box.dir->path() + "/storage";
  for (const auto& v : box.volumes) {
    // The contain step opens an ro source again, in the sandbox's mount namespace, by this
    // name, and checks that it is still the file the runtime opened (which the clone inherits).
    std::string source = spec.volume_root.empty() ? v.mount->source : spec.volume_root + "/" + v.mount->source;
    VolumeBind bind{v.mount->target, v.mount->read_only, source, -1, Storage::VolumeDir(v.storage_index)};
    if (v.mount->read_only) bind.checked_fd = v.fd.get();
    plan.root.volumes.push_back(std::move(bind));
  }
  std::sort(plan.root.volumes.begin(), plan.root.volumes.end(),
            [](const VolumeBind& a, const VolumeBind& b) { return a.target < b.target; });
  return plan;
}

// This thread, in another network namespace until destroyed: a clone made meanwhile is born in
// it. Only root may enter a namespace of the host's user namespace.
class NetnsVisit {
 public:
  static Expected<NetnsVisit> Enter(const std::string& path) {
    NetnsVisit visit;
    visit.home_.Reset(open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    if (!visit.home_.valid()) return std::unexpected(Error::Sys("open this thread's network namespace"));
    // The engine names it (a /run/netns file, or /proc/PID/ns/net, a link to follow); setns checks
    // that it is a network namespace.
    UniqueFd target(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!target.valid()) return std::unexpected(Error::Sys("open the network namespace " + path));
    if (setns(target.get(), CLONE_NEWNET) != 0) return std::unexpected(Error::Sys("join the network namespace " + path));
    return visit;
  }
  NetnsVisit() = default;
  NetnsVisit(NetnsVisit&&) = default;
  ~NetnsVisit() {
    // Failing to return would leave the runtime in the container's network: end it instead.
    if (home_.valid() && setns(home_.get(), CLONE_NEWNET) != 0) abort();
  }

 private:
  UniqueFd home_;
};

using SetupMessage = std::pair<channel::Message, std::vector<UniqueFd>>;
Expected<SetupMessage> AwaitSetup(const Sandbox& box);

Expected<void> StartSandbox(const SandboxSpec& spec, Sandbox& box) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return std::unexpected(Error::Sys("socketpair"));
  box.channel.Reset(pair[0]);
  UniqueFd child_end(pair[1]);
  ContainPlan plan = MakePlan(spec, box, child_end.get());
  plan.cgroup = box.cgroup->OpenEntry();
  int pidfd = -1;
  unsigned long flags = CLONE_NEWNS | CLONE_PIDFD | SIGCHLD;
  // Each namespace is a protection of its own (mutant.h). The mount namespace is not: without
  // it the setup would mount over, and pivot, the host's own tree.
  if (SMOLBOX_PROTECTED("userns")) flags |= CLONE_NEWUSER;
  if (SMOLBOX_PROTECTED("pidns")) flags |= CLONE_NEWPID;
  if (SMOLBOX_PROTECTED("netns") && spec.network_namespace.empty()) flags |= CLONE_NEWNET;
  if (SMOLBOX_PROTECTED("ipcns")) flags |= CLONE_NEWIPC;
  if (SMOLBOX_PROTECTED("utsns")) flags |= CLONE_NEWUTS;
  // The engine's netns (CNI) is entered only around the clone, which is born in it.
  std::optional<NetnsVisit> visit;
  if (!spec.network_namespace.empty()) {
    SMOLBOX_ASSIGN_OR_RETURN(auto entered, NetnsVisit::Enter(spec.network_namespace));
    visit.emplace(std::move(entered));
  }
  long pid = plan.cgroup.Clone(flags, &pidfd);
  if (pid == 0) {
    // Our copy of the runtime's end must go, or a dead runtime would never read as EOF here.
    close(box.channel.Release());
    ContainAndExecAgent(std::move(plan));
  }
  int clone_errno = errno;
  visit.reset();  // the runtime's way back, never the child's
  if (pid < 0) return std::unexpected(Error::Sys("clone with new namespaces", clone_errno));
  box.pid = static_cast<pid_t>(pid);
  box.pidfd.Reset(pidfd);
  // While the child joins its cgroups.
  SMOLBOX_TRY(confine::WriteIdMaps(box.pid, box.identity));
  auto joined = AwaitSetup(box);
  SMOLBOX_TRY(joined);
  if (joined->first.Type() != "joined") {
    return std::unexpected(Error{"setup", "unexpected message \"" + joined->first.Type() + "\"", 0});
  }
  SMOLBOX_TRY(box.cgroup->EnsureHolds(box.pid));
  return channel::WriteMessage(box.channel.get(), channel::Message{{{"type", "go"}}, ""});
}

// The next setup message, bounded in time: a setup that hangs must not hang the runtime.
Expected<SetupMessage> AwaitSetup(const Sandbox& box) {
  pollfd fds[2] = {{box.channel.get(), POLLIN, 0}, {box.pidfd.get(), POLLIN, 0}};
  int rc = poll(fds, 2, kSetupTimeoutMs);
  if (rc == 0) return std::unexpected(Error{"setup", "the sandbox did not start within 30 s", ETIMEDOUT});
  if (!(fds[0].revents & POLLIN)) return std::unexpected(Error{"setup", "the sandbox's setup died", 0});
  auto got = shared::ReceiveWithFds(box.channel.get(), kMaxSetupFrameBytes);
  if (!got) return std::unexpected(Error{"setup", "the sandbox's setup went away: " + got.error().ToString(), 0});
  if (got->first.Type() == "setup_error") {
    const auto& h = got->first.header;
    return std::unexpected(
        Error{StringOr(h, "where", "setup"), StringOr(h, "what", ""), IntOr(h, "errno", 0)});
  }
  return std::move(*got);
}

// The listeners the setup made in the sandbox's netns: tcp4, dns and, with IPv6, tcp6.
Expected<void> StartGateway(const SandboxSpec& spec, Sandbox& box, std::vector<UniqueFd> fds) {
  if (!box.uplink || fds.size() < 2) {
    return std::unexpected(Error{"setup", "an egress message the sandbox was not to send", 0});
  }
  net::GatewayListeners listeners;
  listeners.tcp4 = std::move(fds[0]);
  listeners.dns = std::move(fds[1]);
  if (fds.size() > 2) listeners.tcp6 = std::move(fds[2]);
  SMOLBOX_ASSIGN_OR_RETURN(box.gateway, net::Gateway::Start(spec.egress, std::move(*box.uplink), std::move(listeners)));
  box.uplink.reset();
  return {};
}

// A setup message's warnings, into the result.
void TakeWarnings(const channel::Message& message, RunResult& result) {
  for (const auto& text : message.header.value("warnings", nlohmann::json::array())) {
    if (text.is_string()) result.Warn(text.get<std::string>());
  }
}

Expected<void> AwaitReady(const SandboxSpec& spec, Sandbox& box, RunResult& result) {
  auto message = AwaitSetup(box);
  SMOLBOX_TRY(message);
  if (message->first.Type() == "storage") {
    // Rootless: the setup mounted its tmpfs and sent it; lay it out and fill it, then go on.
    if (message->second.size() != 1) return std::unexpected(Error{"setup", "a storage message without its descriptor", 0});
    box.storage.emplace(Storage::Adopt(std::move(message->second.front())));
    SMOLBOX_TRY(shared::FillStorage(spec, box.volumes, *box.storage, box.identity.host_uid, box.identity.host_gid, result));
    SMOLBOX_TRY(channel::WriteMessage(box.channel.get(), channel::Message{{{"type", "go"}}, ""}));
    message = AwaitSetup(box);
    SMOLBOX_TRY(message);
  }
  if (message->first.Type() == "warnings") {
    TakeWarnings(message->first, result);
    message = AwaitSetup(box);
    SMOLBOX_TRY(message);
  }
  if (message->first.Type() == "egress") {
    TakeWarnings(message->first, result);
    SMOLBOX_TRY(StartGateway(spec, box, std::move(message->second)));
    message = AwaitSetup(box);
    SMOLBOX_TRY(message);
  }
  if (message->first.Type() != "ready") {
    return std::unexpected(Error{"setup", "unexpected message \"" + message->first.Type() + "\"", 0});
  }
  return {};
}


void StopSandbox(Sandbox& box) {
  // Closing the channel tells the agent to end; it kills what is left in the namespace.
  shared::StopAgent(box.channel.get(), box.pidfd.get(), box.pid, kStopWaitMs);
  box.pid = -1;
  box.cgroup->KillAll();
}

Expected<void> Prepare(const SandboxSpec& spec, Sandbox& box, RunResult& result) {
  // On ns an interpreter starts natively, in milliseconds: there is nothing to prewarm.
  if (!spec.prewarm.empty()) return std::unexpected(Error::Field("prewarm", "needs the vm backend"));
  box.identity = confine::PlanIdentity(spec.user);
  auto volumes = shared::OpenVolumes(spec);
  SMOLBOX_TRY(volumes);
  box.volumes = std::move(*volumes);
  auto dir = RunDir::Create();
  SMOLBOX_TRY(dir);
  box.dir.emplace(std::move(*dir));
  // One more pid than asked: the agent itself lives in the cgroup.
  box.cgroup.emplace(Cgroup::Create(box.dir->id(), {spec.limits.memory_mib << 20, spec.limits.cpus,
                                                    spec.limits.pids + 1, spec.cpu_shares}));
  if (!box.identity.rootless) {
    SMOLBOX_TRY(shared::EnterPrivateMountNamespace());
    if (spec.map_image_ids) {
      SMOLBOX_TRY(MountIdmappedImage(spec.image, box.identity, box.dir->path() + "/image"));
      box.image_idmapped = true;
    }
    auto storage = Storage::CreateDisk(spec.limits.storage_mib, box.dir->path() + "/storage");
    SMOLBOX_TRY(storage);
    box.storage.emplace(std::move(*storage));
    SMOLBOX_TRY(shared::FillStorage(spec, box.volumes, *box.storage, box.identity.host_uid, box.identity.host_gid, result));
  } else if (mkdir((box.dir->path() + "/storage").c_str(), 0700) != 0) {
    return std::unexpected(Error::Sys("mkdir storage mountpoint"));
  }
  if (spec.egress.policy.Enabled()) {
    SMOLBOX_ASSIGN_OR_RETURN(auto uplink, net::Uplink::Open(spec.egress.netns, spec.egress.dns_server));
    box.uplink.emplace(std::move(uplink));
  }
  if (!spec.attach_socket.empty()) {
    SMOLBOX_ASSIGN_OR_RETURN(box.attach, shared::ListenAttachSocket(spec.attach_socket));
  }
  SMOLBOX_ASSIGN_OR_RETURN(auto agent_path, FindAgent());
  auto agent = SealedAgentCopy(agent_path);
  SMOLBOX_TRY(agent);
  box.agent = std::move(*agent);
  SMOLBOX_TRY(StartSandbox(spec, box));
  // The agent holds the listener now; with the runtime's copy gone, a connection once the
  // sandbox has died is refused rather than left waiting.
  box.attach.Reset();
  return AwaitReady(spec, box, result);
}

shared::AgentSandbox Describe(const Sandbox& box) {
  shared::AgentSandbox agent;
  agent.backend = "ns";
  agent.isolation = "namespaces";
  agent.spec = &box.spec;
  agent.channel = box.channel.get();
  agent.pidfd = box.pidfd.get();
  agent.death_reason = "its agent (PID 1 of the sandbox) exited";
  agent.uid = box.identity.uid;
  agent.gid = box.identity.gid;
  agent.cgroup = &*box.cgroup;
  agent.backstop_warning = "timeout: the agent did not end the run; the host backstop killed the sandbox";
  agent.storage = box.storage ? &*box.storage : nullptr;
  agent.volumes = &box.volumes;
  agent.gateway = box.gateway.get();
  return agent;
}

class NsSession final : public shared::AgentSession {
 public:
  explicit NsSession(std::unique_ptr<Sandbox> box) : AgentSession(Describe(*box)), box_(std::move(box)) {}
  ~NsSession() override { StopSandbox(*box_); }

 private:
  std::unique_ptr<Sandbox> box_;
};

class NsBackend final : public Backend {
 public:
  std::unique_ptr<Session> Start(const SandboxSpec& spec, RunResult& result) override {
    result.backend = "ns";
    result.isolation = "namespaces";
    auto start = Clock::now();
    shared::SweepStaleRuns();
    auto box = std::make_unique<Sandbox>();
    box->spec = spec;
    auto ready = Prepare(box->spec, *box, result);
    result.timings.setup_ms = MsSince(start);
    if (!ready) {
      if (box->cgroup) shared::WarnWeakLimits(&*box->cgroup, box->storage ? &*box->storage : nullptr, result);
      result = shared::SetupFailure(std::move(result), ready.error());
      return nullptr;
    }
    return std::make_unique<NsSession>(std::move(box));
  }
};

}  // namespace

std::unique_ptr<Backend> MakeNsBackend() { return std::make_unique<NsBackend>(); }

}  // namespace smolbox::ns
