#include "smolbox/image_store.h"
#include "vm_backend.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>

#include <fmt/format.h>

#include "accel.h"
#include "agent_session.h"
#include "cgroup.h"
#include "egress_port.h"
#include "gateway.h"
#include "guest_artifacts.h"
#include "guest_protocol.h"
#include "host_root.h"
#include "jail.h"
#include "json_bounds.h"
#include "qemu_command.h"
#include "qmp.h"
#include "snapshot.h"
#include "state.h"
#include "storage.h"
#include "user.h"
#include "workspace.h"

namespace smolbox::vm {
namespace {

using Clock = std::chrono::steady_clock;

// Guest RAM on top of --mem: the kernel, the agent and the page cache outside the workload's
// cgroup. The workload itself is held to --mem by the cgroup inside.
constexpr int64_t kGuestOverheadMiB = 192;
// QEMU's own memory on top of guest RAM (device emulation, the TCG translation cache).
constexpr int64_t kQemuOverheadMiB = 256;
constexpr int64_t kQemuPids = 256;
// Below this a Python or Node workload cannot start in the guest.
constexpr int64_t kMinVmMemoryMiB = 32;
constexpr int64_t kBootTimeoutTcgMs = 90000;
constexpr int64_t kBootTimeoutKvmMs = 20000;
constexpr int64_t kSetupTimeoutMs = 30000;
// Loading a snapshot takes well under a second; past this it is broken, and the VM boots.
constexpr int64_t kRestoreTimeoutTcgMs = 30000;
constexpr int64_t kRestoreTimeoutKvmMs = 10000;
constexpr int64_t kSaveTimeoutTcgMs = 60000;
constexpr int64_t kSaveTimeoutKvmMs = 20000;
// The host's backstop past the agent's own timeout: an emulated guest is slow to react.
constexpr int64_t kBackstopGraceTcgMs = 10000;
constexpr int64_t kBackstopGraceKvmMs = 3000;
constexpr int64_t kPowerOffWaitMs = 3000;
constexpr size_t kKeptConsoleLogs = 20;

int64_t MsSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

// Everything one VM holds; destroyed in reverse order of declaration.
struct Vm {
  SandboxSpec spec;  // the volumes point into its mounts
  Accel accel = Accel::kTcg;
  std::optional<shared::RunDir> dir;
  std::optional<shared::Cgroup> cgroup;
  std::vector<shared::HostVolume> volumes;
  std::optional<shared::Storage> storage;
  GuestArtifacts guest;
  std::string console_path;
  UniqueFd console;
  UniqueFd channel;
  UniqueFd egress_link;  // the host's end of the egress port, until an EgressPort takes it
  std::optional<net::Uplink> uplink;  // with egress: opened first, so a bad one fails early
  std::unique_ptr<net::Gateway> gateway;
  std::unique_ptr<EgressPort> egress_port;
  JailedProcess qemu;
  uid_t host_uid = 0;  // QEMU's, and the storage's owner
  gid_t host_gid = 0;
  uid_t guest_uid = 0;  // the workload's in its user namespace in the guest
  gid_t guest_gid = 0;

  ~Vm() {
    // The port's thread hands streams to the gateway, whose threads post back to the port.
    if (egress_port) egress_port->Stop();
    gateway.reset();
    egress_port.reset();
    shared::KillAndReap(qemu.pidfd.get(), qemu.pid);
  }
};

Expected<void> CheckSpec(const SandboxSpec& spec) {
  if (spec.limits.memory_mib < kMinVmMemoryMiB) {
    return std::unexpected(Error::Field("limits.memory_mib", fmt::format("{} MiB is below the vm backend's floor of {} MiB",
                                                                         spec.limits.memory_mib, kMinVmMemoryMiB)));
  }
  return {};
}

int VcpusFor(const SandboxSpec& spec) {
  int host = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  int wanted = static_cast<int>(std::ceil(std::max(spec.limits.cpus, 1.0)));
  return std::clamp(wanted, 1, host);
}

// Console logs are kept only for VMs that failed to boot, and only the newest of those.
void PruneConsoleLogs(const std::string& logs) {
  std::vector<std::filesystem::directory_entry> entries;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(logs, ec)) {
    if (entry.is_regular_file(ec) && entry.path().extension() == ".log") entries.push_back(entry);
  }
  if (entries.size() < kKeptConsoleLogs) return;
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    std::error_code e;
    return a.last_write_time(e) < b.last_write_time(e);
  });
  for (size_t i = 0; i + kKeptConsoleLogs <= entries.size(); ++i) std::filesystem::remove(entries[i].path(), ec);
}

Expected<void> OpenConsole(Vm& vm) {
  SMOLBOX_ASSIGN_OR_RETURN(auto root, shared::StateRoot());
  std::string logs = root + "/logs";
  if (mkdir(logs.c_str(), 0700) != 0 && errno != EEXIST) return std::unexpected(Error::Sys("mkdir " + logs));
  PruneConsoleLogs(logs);
  vm.console_path = fmt::format("{}/{}.console.log", logs, vm.dir->id());
  vm.console.Reset(open(vm.console_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!vm.console.valid()) return std::unexpected(Error::Sys("create " + vm.console_path));
  return {};
}

std::string FdPath(int fd) { return fmt::format("/proc/self/fd/{}", fd); }

// The machine a run asks for, as QEMU opens it; the same for a boot and a restore.
VmConfig MakeVmConfig(const SandboxSpec& spec, const Vm& vm) {
  VmConfig config;
  config.accel = vm.accel;
  config.memory_mib = spec.limits.memory_mib + kGuestOverheadMiB;
  config.vcpus = VcpusFor(spec);
  config.kernel = FdPath(vm.guest.kernel.get());
  config.initramfs = FdPath(vm.guest.initramfs.get());
  config.rootfs = FdPath(vm.guest.rootfs.get());
  config.tsc_khz = HostTscKhz();
  config.shares.push_back(NinePShare{kStorageTag, FdPath(vm.storage->root_fd()), false});
  for (size_t i = 0; i < vm.volumes.size(); ++i) {
    if (!vm.volumes[i].mount->read_only) continue;
    config.shares.push_back(NinePShare{fmt::format("ro{}", i), FdPath(vm.volumes[i].fd.get()), true});
  }
  return config;
}

// Starts QEMU on a fresh agent channel and egress port; extra_fds are config's qmp_fd and
// incoming_fd.
Expected<void> StartQemu(const Qemu& qemu, VmConfig config, const std::vector<int>& extra_fds, Vm& vm) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return std::unexpected(Error::Sys("socketpair"));
  vm.channel.Reset(pair[0]);
  UniqueFd qemu_end(pair[1]);
  config.channel_fd = qemu_end.get();
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return std::unexpected(Error::Sys("socketpair"));
  vm.egress_link.Reset(pair[0]);
  UniqueFd qemu_egress_end(pair[1]);
  config.egress_fd = qemu_egress_end.get();
  JailPlan plan;
  plan.keep_fds = {vm.guest.kernel.get(), vm.guest.initramfs.get(), vm.guest.rootfs.get(), qemu_end.get(),
                   qemu_egress_end.get(), vm.storage->root_fd()};
  for (const auto& volume : vm.volumes) {
    if (volume.mount->read_only) plan.keep_fds.push_back(volume.fd.get());
  }
  plan.keep_fds.insert(plan.keep_fds.end(), extra_fds.begin(), extra_fds.end());
  plan.argv = QemuArgv(qemu, config);
  plan.console_fd = vm.console.get();
  plan.host_uid = vm.host_uid;
  plan.host_gid = vm.host_gid;
  plan.inside_uid = kGuestIdBase + vm.guest_uid;
  plan.inside_gid = kGuestIdBase + vm.guest_gid;
  SMOLBOX_ASSIGN_OR_RETURN(auto jailed, StartJailed(plan, *vm.cgroup));
  vm.qemu = std::move(jailed);
  return {};
}

std::string LastLine(const std::string& path) {
  std::ifstream in(path);
  std::string last;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) last = line;
  }
  return last.substr(0, 300);
}

// A QEMU that will not be used: a failed restore, before the boot that replaces it.
void KillQemu(Vm& vm) {
  shared::KillAndReap(vm.qemu.pidfd.get(), vm.qemu.pid);
  vm.qemu.pid = -1;
  vm.qemu.pidfd.Reset();
  vm.channel.Reset();
  vm.egress_link.Reset();
}

// The next message from the guest within timeout_ms; QEMU's death or silence is an error that
// points at the console log.
Expected<channel::Message> AwaitGuest(const Vm& vm, int64_t timeout_ms, const char* what) {
  pollfd fds[2] = {{vm.channel.get(), POLLIN, 0}, {vm.qemu.pidfd.get(), POLLIN, 0}};
  int rc = poll(fds, 2, static_cast<int>(timeout_ms));
  std::string log = fmt::format("see the console log {}", vm.console_path);
  if (rc == 0) return std::unexpected(Error{what, fmt::format("the guest did not answer within {} s; {}", timeout_ms / 1000, log), ETIMEDOUT});
  if (!(fds[0].revents & POLLIN)) return std::unexpected(Error{what, "QEMU exited; " + log, 0});
  auto message = channel::ReadMessage(vm.channel.get(), "guest message");
  if (!message) return std::unexpected(Error{what, message.error().ToString() + "; " + log, 0});
  if (!*message) return std::unexpected(Error{what, "the guest closed its channel; " + log, 0});
  return std::move(**message);
}

GuestSetup MakeGuestSetup(const SandboxSpec& spec, const Vm& vm) {
  GuestSetup setup;
  setup.workdir = spec.workdir;
  setup.uid = vm.guest_uid;
  setup.gid = vm.guest_gid;
  setup.memory_bytes = spec.limits.memory_mib << 20;
  setup.pids = spec.limits.pids;
  // Whole CPUs are the vCPUs; a fraction is a quota inside.
  setup.cpus = spec.limits.cpus < VcpusFor(spec) ? spec.limits.cpus : 0;
  setup.egress = spec.egress.policy.Enabled();
  setup.image_root = spec.image != "host";
  setup.ca_bundle = spec.ca_bundle;
  if (!spec.hostname.empty()) setup.hostname = spec.hostname;
  if (spec.writable_root) setup.writable_root_mib = spec.limits.storage_mib;
  setup.root_files = spec.root_files;
  setup.prewarm = spec.prewarm;
  for (size_t i = 0; i < vm.volumes.size(); ++i) {
    const auto& v = vm.volumes[i];
    setup.volumes.push_back(GuestVolume{v.mount->target, v.mount->read_only,
                                        v.mount->read_only ? fmt::format("ro{}", i) : "",
                                        v.mount->read_only ? "" : shared::Storage::VolumeDir(v.storage_index)});
  }
  // Parents before children, as the namespace backend mounts them.
  std::sort(setup.volumes.begin(), setup.volumes.end(),
            [](const GuestVolume& a, const GuestVolume& b) { return a.target < b.target; });
  return setup;
}

Expected<void> ExpectReply(const channel::Message& reply, const char* what, const std::string& done) {
  const auto& h = reply.header;
  if (reply.Type() == done) return {};
  if (reply.Type().ends_with("_error")) {
    return std::unexpected(Error{fmt::format("{}: {}", what, StringOr(h, "where", "")),
                                 StringOr(h, "what", ""), IntOr(h, "errno", 0)});
  }
  return std::unexpected(Error{what, "unexpected message \"" + reply.Type() + "\"", 0});
}

// Every VM that passed through a snapshot shares its entropy pool, clock and hostname with
// all the others; the agent takes fresh ones before anything else.
Expected<void> FreshenGuest(const Vm& vm, int64_t timeout_ms) {
  GuestRestore restore;
  restore.seed.resize(kRestoreSeedBytes);
  if (getrandom(restore.seed.data(), restore.seed.size(), 0) != static_cast<ssize_t>(restore.seed.size())) {
    return std::unexpected(Error::Sys("getrandom"));
  }
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  restore.realtime_sec = now.tv_sec;
  restore.realtime_nsec = now.tv_nsec;
  SMOLBOX_TRY(channel::WriteMessage(vm.channel.get(), EncodeGuestRestore(restore)));
  SMOLBOX_ASSIGN_OR_RETURN(auto reply, AwaitGuest(vm, timeout_ms, "restore"));
  return ExpectReply(reply, "restore", "restored_done");
}

struct SnapshotPlace {
  SnapshotStore& store;
  const SnapshotKey& key;
};

// Saves the VM that just said "ready" and runs it on. Failing to save costs only the warning;
// failing to run on fails the run.
Expected<void> SaveSnapshot(Qmp& qmp, const SnapshotPlace& place, const Vm& vm, RunResult& result) {
  int64_t timeout = vm.accel == Accel::kKvm ? kSaveTimeoutKvmMs : kSaveTimeoutTcgMs;
  auto pending = place.store.Begin(place.key);
  auto saved = pending ? SaveVm(qmp, pending->fd.get(), static_cast<int>(timeout)) : std::unexpected(pending.error());
  if (pending && saved) saved = place.store.Commit(*pending);
  if (pending && !saved) place.store.Abandon(*pending);
  if (!saved) result.Warn(fmt::format("boot snapshot: could not save one ({}); the next run boots again", saved.error().ToString()));
  SMOLBOX_TRY(ResumeVm(qmp, static_cast<int>(timeout)));
  return FreshenGuest(vm, kSetupTimeoutMs);
}

// A clean boot to "ready"; with a place, the booted VM is saved there for later runs.
Expected<void> Boot(const Qemu& qemu, VmConfig config, const std::optional<SnapshotPlace>& place, Vm& vm,
                    RunResult& result) {
  UniqueFd qmp_host, qmp_qemu;
  std::vector<int> extra_fds;
  if (place) {
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return std::unexpected(Error::Sys("socketpair"));
    qmp_host.Reset(pair[0]);
    qmp_qemu.Reset(pair[1]);
    config.qmp_fd = qmp_qemu.get();
    extra_fds.push_back(qmp_qemu.get());
  }
  auto start = Clock::now();
  SMOLBOX_TRY(StartQemu(qemu, config, extra_fds, vm));
  qmp_qemu.Reset();
  int64_t boot_timeout = vm.accel == Accel::kKvm ? kBootTimeoutKvmMs : kBootTimeoutTcgMs;
  auto ready = AwaitGuest(vm, boot_timeout, "boot");
  SMOLBOX_TRY(ready);
  if (ready->Type() != "ready") return std::unexpected(Error{"boot", "unexpected message \"" + ready->Type() + "\"", 0});
  if (place) {
    Qmp qmp(std::move(qmp_host));
    auto greeted = qmp.Handshake(static_cast<int>(kSetupTimeoutMs));
    if (!greeted) {
      result.Warn(fmt::format("boot snapshot: could not save one ({}); the next run boots again", greeted.error().ToString()));
    } else if (auto ok = SaveSnapshot(qmp, *place, vm, result); !ok) {
      return ok;
    }
  }
  result.timings.boot_ms = MsSince(start);
  return {};
}

// Restores the VM from its snapshot; false when there is none or it failed, and then the VM
// must boot. A snapshot that fails is removed, with a warning.
bool Restore(const Qemu& qemu, VmConfig config, const SnapshotPlace& place, Vm& vm, RunResult& result) {
  auto warn = [&](const Error& e) {
    result.Warn(fmt::format("boot snapshot {} is stale or corrupt ({}); booted afresh and replaced it",
                            place.store.PathOf(place.key), e.ToString()));
  };
  auto file = place.store.OpenForRestore(place.key);
  if (!file) warn(file.error());
  if (!file || !*file) return false;
  int fd = (*file)->get();
  config.incoming_fd = fd;
  auto start = Clock::now();
  if (auto ok = StartQemu(qemu, config, {fd}, vm); !ok) {
    result.Warn("boot snapshot: " + ok.error().ToString());
    return false;
  }
  int64_t timeout = vm.accel == Accel::kKvm ? kRestoreTimeoutKvmMs : kRestoreTimeoutTcgMs;
  // QEMU loads the snapshot and runs it; the agent reads this message once the guest runs.
  if (auto fresh = FreshenGuest(vm, timeout); !fresh) {
    KillQemu(vm);
    // The console log, where QEMU says why, is removed once the boot that follows succeeds.
    std::string qemu_said = LastLine(vm.console_path);
    warn(qemu_said.empty() ? fresh.error() : Error{"restore", "QEMU: " + qemu_said, 0});
    place.store.Discard(place.key, fd);
    return false;
  }
  place.store.Touch(fd);
  result.timings.boot_ms = MsSince(start);
  return true;
}

// A VM whose agent waits for "setup": restored from the boot snapshot when there is one,
// booted (and saved for the next run) otherwise.
Expected<void> BringUp(const SandboxSpec& spec, const Qemu& qemu, Vm& vm, RunResult& result) {
  VmConfig config = MakeVmConfig(spec, vm);
  if (!spec.vm_snapshot) return Boot(qemu, config, std::nullopt, vm, result);
  auto key = MakeSnapshotKey(qemu, vm.guest, config);
  auto store = key ? SnapshotStore::Open() : std::unexpected(key.error());
  if (!store) {
    result.Warn("boot snapshot: " + store.error().ToString() + "; booting");
    return Boot(qemu, config, std::nullopt, vm, result);
  }
  SnapshotPlace place{*store, *key};
  if (Restore(qemu, config, place, vm, result)) return {};
  return Boot(qemu, config, place, vm, result);
}

// The host's side of egress: the gateway, with no listeners of its own, fed by the port.
Expected<void> StartEgress(const SandboxSpec& spec, Vm& vm) {
  if (!vm.uplink) return {};
  SMOLBOX_ASSIGN_OR_RETURN(vm.gateway, net::Gateway::Start(spec.egress, std::move(*vm.uplink), {}));
  vm.uplink.reset();
  SMOLBOX_ASSIGN_OR_RETURN(vm.egress_port, EgressPort::Start(std::move(vm.egress_link), *vm.gateway));
  return {};
}

Expected<void> SetUpGuest(const SandboxSpec& spec, Vm& vm) {
  SMOLBOX_TRY(channel::WriteMessage(vm.channel.get(), EncodeGuestSetup(MakeGuestSetup(spec, vm))));
  SMOLBOX_ASSIGN_OR_RETURN(auto done, AwaitGuest(vm, kSetupTimeoutMs, "guest setup"));
  return ExpectReply(done, "guest setup", "setup_done");
}

// A store image replaces the host image as the guest's disk; the boot snapshot, keyed by the
// disk, follows. A rootfs directory has no disk form of its own: its caller makes one
// (SandboxSpec::image_disk), as the OCI runtime does of a bundle's rootfs.
Expected<void> UseStoreImage(const SandboxSpec& spec, GuestArtifacts& guest) {
  if (spec.image == "host") return {};
  std::optional<std::string> disk = spec.image_disk;
  if (spec.image_disk.empty()) {
    SMOLBOX_ASSIGN_OR_RETURN(disk, image::ErofsOfStoreImage(spec.image));
  }
  if (!disk) {
    return std::unexpected(Error::Field("image", "the vm backend runs the host image or an image from the store "
                                                 "(smolbox image import); a rootfs directory runs on the ns backend only"));
  }
  UniqueFd fd(open(disk->c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return std::unexpected(Error::Sys("open " + *disk));
  guest.rootfs = std::move(fd);
  return {};
}

Expected<void> Prepare(const SandboxSpec& spec, Vm& vm, RunResult& result) {
  SMOLBOX_TRY(CheckSpec(spec));
  if (spec.egress.policy.Enabled()) {
    SMOLBOX_ASSIGN_OR_RETURN(auto uplink, net::Uplink::Open(spec.egress.netns, spec.egress.dns_server));
    vm.uplink.emplace(std::move(uplink));
  }
  SMOLBOX_ASSIGN_OR_RETURN(auto qemu, FindQemu());
  auto guest = OpenGuestArtifacts(GuestDirToRun());
  SMOLBOX_TRY(guest);
  vm.guest = std::move(*guest);
  SMOLBOX_TRY(UseStoreImage(spec, vm.guest));
  auto volumes = shared::OpenVolumes(spec);
  SMOLBOX_TRY(volumes);
  vm.volumes = std::move(*volumes);
  for (size_t i = 0; i < vm.volumes.size(); ++i) {
    struct stat st{};
    if (vm.volumes[i].mount->read_only && fstat(vm.volumes[i].fd.get(), &st) == 0 && !S_ISDIR(st.st_mode)) {
      return std::unexpected(Error::Field(fmt::format("mounts[{}].source", i), "the vm backend shares directories only"));
    }
  }
  // As root QEMU and the storage take a uid of the range set aside for sandboxes; without root
  // there is only this user's own.
  const bool rootless = !IsHostRoot();
  vm.guest_uid = spec.user.uid;
  vm.guest_gid = spec.user.gid;
  vm.host_uid = rootless ? geteuid() : confine::kHostIdBase + vm.guest_uid;
  vm.host_gid = rootless ? getegid() : confine::kHostIdBase + vm.guest_gid;
  auto dir = shared::RunDir::Create();
  SMOLBOX_TRY(dir);
  vm.dir.emplace(std::move(*dir));
  int64_t qemu_mib = spec.limits.memory_mib + kGuestOverheadMiB + kQemuOverheadMiB;
  // A tmpfs's pages belong to the cgroup of whoever writes them: QEMU, for the guest.
  if (rootless) qemu_mib += spec.limits.storage_mib;
  // CPU: the vCPUs plus one for QEMU's own I/O thread; the workload's share is held inside.
  double qemu_cpus = VcpusFor(spec) + 1.0;
  vm.cgroup.emplace(shared::Cgroup::Create(vm.dir->id(), {qemu_mib << 20, qemu_cpus, kQemuPids}));
  for (const auto& problem : vm.cgroup->problems()) result.Warn("QEMU's cgroup: " + problem);
  // Only root may loop-mount the disk; without root the storage is a tmpfs that costs RAM.
  if (!rootless) SMOLBOX_TRY(shared::EnterPrivateMountNamespace());
  std::string mountpoint = vm.dir->path() + "/storage";
  auto storage = rootless ? shared::Storage::CreateDetachedTmpfs(spec.limits.storage_mib, mountpoint, true)
                          : shared::Storage::CreateDisk(spec.limits.storage_mib, mountpoint);
  SMOLBOX_TRY(storage);
  vm.storage.emplace(std::move(*storage));
  vm.storage->set_metadata(shared::Metadata::kMappedXattr);  // QemuArgv's security_model
  SMOLBOX_TRY(shared::FillStorage(spec, vm.volumes, *vm.storage, vm.host_uid, vm.host_gid, result));
  SMOLBOX_TRY(OpenConsole(vm));
  SMOLBOX_TRY(BringUp(spec, qemu, vm, result));
  SMOLBOX_TRY(StartEgress(spec, vm));
  return SetUpGuest(spec, vm);
}

// Closing the channel tells the agent to power the guest off; QEMU then exits by itself.
void StopVm(Vm& vm) {
  shared::StopAgent(vm.channel.get(), vm.qemu.pidfd.get(), vm.qemu.pid, kPowerOffWaitMs);
  vm.qemu.pid = -1;
  vm.qemu.pidfd.Reset();
  vm.cgroup->KillAll();
}

shared::AgentSandbox Describe(const Vm& vm) {
  shared::AgentSandbox agent;
  agent.backend = "vm";
  agent.isolation = vm.accel == Accel::kKvm ? "kvm" : "tcg";
  agent.spec = &vm.spec;
  agent.channel = vm.channel.get();
  agent.pidfd = vm.qemu.pidfd.get();
  agent.death_reason = "its VM (QEMU) exited";
  agent.uid = vm.guest_uid;
  agent.gid = vm.guest_gid;
  // The agent in the guest holds the workload's cgroup: its report has the limits too.
  agent.cgroup = nullptr;
  agent.grace_ms = vm.accel == Accel::kKvm ? kBackstopGraceKvmMs : kBackstopGraceTcgMs;
  agent.backstop_warning = "timeout: the agent in the guest did not end the run; the host backstop killed the VM";
  agent.storage = &*vm.storage;
  agent.volumes = &vm.volumes;
  agent.gateway = vm.gateway.get();
  return agent;
}

class VmSession final : public shared::AgentSession {
 public:
  explicit VmSession(std::unique_ptr<Vm> vm) : AgentSession(Describe(*vm)), vm_(std::move(vm)) {}
  ~VmSession() override { StopVm(*vm_); }

 private:
  std::unique_ptr<Vm> vm_;
};

class VmBackend final : public Backend {
 public:
  std::unique_ptr<Session> Start(const SandboxSpec& spec, RunResult& result) override {
    result.backend = "vm";
    auto start = Clock::now();
    auto accel = ChooseAccel(spec.accel);
    if (!accel) return SetupError(result, accel.error(), start);
    auto vm = std::make_unique<Vm>();
    vm->accel = *accel;
    result.isolation = *accel == Accel::kKvm ? "kvm" : "tcg";
    shared::SweepStaleRuns();
    vm->spec = spec;
    if (auto ready = Prepare(vm->spec, *vm, result); !ready) return SetupError(result, ready.error(), start);
    unlink(vm->console_path.c_str());  // booted: the log is only kept for failures
    result.timings.setup_ms = MsSince(start);
    return std::make_unique<VmSession>(std::move(vm));
  }

 private:
  static std::unique_ptr<Session> SetupError(RunResult& result, const Error& error, Clock::time_point start) {
    result = shared::SetupFailure(std::move(result), error);
    result.timings.setup_ms = MsSince(start);
    return nullptr;
  }
};

}  // namespace

std::unique_ptr<Backend> MakeVmBackend() { return std::make_unique<VmBackend>(); }

}  // namespace smolbox::vm
