// What to run, in what, under which limits. A SandboxSpec is what a sandbox holds for all its
// execs (backend, image, mounts, user, and the limits it enforces as a whole: memory, cpus,
// pids, storage); an ExecSpec is one exec in it (argv, stdin, env, cwd, and the limits each
// exec has of its own: wall time, CPU time, output, files). A RunSpec, what `smolbox run` and
// a JSON spec file give, is both: one sandbox that serves one exec.
//
//   auto spec = smolbox::ParseRunSpec(R"({"argv": ["/usr/bin/python3", "-c", "print(1)"],
//                                          "limits": {"timeout_ms": 1000}})");
//   if (!spec) { fmt::print("{}\n", spec.error().ToString()); return 125; }
//   if (auto ok = smolbox::ValidateRunSpec(*spec); !ok) { ... }
//   backend->Start(spec->sandbox, setup)->Exec(spec->exec, io, -1);
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "smolbox/egress_policy.h"
#include "smolbox/error.h"

namespace smolbox {

enum class BackendKind { kAuto, kNs, kVm };
// The vm backend's accelerator: auto is KVM when usable; TCG (emulation) only when asked for.
enum class Accel { kAuto, kKvm, kTcg };
// Who the workload is inside its sandbox; on the host it is never anyone (docs/security.md).
// sandbox (1000:1000) is the default, root (0:0) is root only of its user namespace, and an image's
// User or --user UID[:GID] may name any other ids a sandbox maps.
struct WorkloadUser {
  uint32_t uid = 1000;
  uint32_t gid = 1000;
  static constexpr WorkloadUser Sandbox() { return {1000, 1000}; }
  static constexpr WorkloadUser Root() { return {0, 0}; }
  bool operator==(const WorkloadUser&) const = default;
};
// A sandbox maps ids 0-65535.
inline constexpr uint32_t kMaxWorkloadId = 65535;
enum class NetworkMode { kNone };

// Enforced on the sandbox as a whole, for its whole life.
struct SandboxLimits {
  int64_t memory_mib = 512;
  double cpus = 1.0;
  int64_t pids = 64;
  int64_t storage_mib = 128;  // all the space the sandbox can write
  bool operator==(const SandboxLimits&) const = default;
};

// Each exec's own.
struct ExecLimits {
  int64_t timeout_ms = 30000;
  std::optional<int64_t> cpu_ms;  // unset: only the wall timeout bounds CPU
  int64_t output_bytes = 1 << 20;  // per stream
  int64_t files = 256;             // open file descriptors (RLIMIT_NOFILE)
  bool operator==(const ExecLimits&) const = default;
};

// Every limit with its default: what a spec's "limits" object may set.
struct Limits : SandboxLimits, ExecLimits {};

struct Mount {
  std::string source;  // host path
  std::string target;  // absolute path inside the sandbox
  bool read_only = false;
  // An empty rw directory of the sandbox's storage, with no host source and nothing copied back:
  // an OCI tmpfs mount (docs/oci.md). Set only by the OCI runtime, never a spec field.
  bool scratch = false;
  bool operator==(const Mount&) const = default;
};

// Egress: the policy, and where the host side resolves and dials from (docs/egress.md).
struct EgressSpec {
  EgressPolicy policy;  // policy.Enabled() false: loopback only
  std::optional<SocketAddress> dns_server;  // unset: the first nameserver of /etc/resolv.conf
  std::string netns;  // a network namespace file the gateway dials from; empty: smolbox's own
  int64_t max_connections = 64;       // open at once
  std::optional<int64_t> limit_bytes;  // bytes out, all connections together
  bool operator==(const EgressSpec&) const = default;
};

struct SandboxSpec {
  BackendKind backend = BackendKind::kAuto;
  Accel accel = Accel::kAuto;
  std::string image = "host";  // "host" or a rootfs directory
  std::string workdir = "/work";  // made at start; each exec's HOME and cwd unless it names its own
  SandboxLimits limits;
  NetworkMode network = NetworkMode::kNone;
  EgressSpec egress;
  std::vector<Mount> mounts;
  // Set: each mount's source is a path relative to this directory, opened beneath it without
  // following any symlink (smolbox serve --volume-root, for clients that name no host path).
  // Not a spec field: the operator sets it, never the spec's author.
  std::string volume_root;
  WorkloadUser user;
  // PEM certificates added to the sandbox's CA trust store (--ca-bundle): the host image's store,
  // or a store image's own, with these after it at /etc/smolbox/ca-certificates.crt, which each
  // exec's SSL_CERT_FILE, NODE_EXTRA_CA_CERTS, REQUESTS_CA_BUNDLE, PIP_CERT and CURL_CA_BUNDLE
  // name. Empty: the store as it is.
  std::string ca_bundle;
  // Set only by the OCI runtime (docs/oci.md), as a bundle's config.json asks; never spec
  // fields. writable_root: the image's root takes writes, held in memory and capped at the
  // storage limit (an OCI root is writable unless root.readonly). hostname: the sandbox's own,
  // where empty is smolbox's. network_namespace: a netns file the engine made (CNI), joined
  // instead of a new empty one.
  // map_image_ids: the image's files belong to host ids 0-65535 (an engine's rootfs), shown to
  // the sandbox as its own ids through an idmapped mount (root runtime only).
  // attach_socket (ns only): a unix socket made at this path, whose every connection is served
  // by an agent of its own in the sandbox, so that a container's exec runs beside its process.
  // root_files (an image only): absolute path -> content, files written into the image's root
  // as its own, read-only with it: an engine's small files (/etc/hosts, /run/.containerenv),
  // copied rather than bound, so that no host path of the engine's shows in the sandbox.
  bool writable_root = false;
  std::string hostname;
  std::string network_namespace;
  bool map_image_ids = false;
  std::string attach_socket;
  std::map<std::string, std::string> root_files;
  // ns only: the CPU's relative weight (linux.resources.cpu.shares, 2 to 262144); 0: the default.
  int64_t cpu_shares = 0;
  // vm only: an erofs disk of the image directory, made by the caller, which the guest mounts
  // as the image (the OCI runtime makes one of a bundle's rootfs). Empty: a store image's own.
  std::string image_disk;
  // vm backend: restore the guest from a boot snapshot instead of booting it, making the
  // snapshot on the first run (docs/guest.md, "Boot snapshot"). false: always a clean boot.
  bool vm_snapshot = true;
  // vm backend, persistent sandboxes: "python" keeps a started interpreter in the guest that
  // forks each `python3 SCRIPT` or `python3 -c` exec (docs/performance.md, "Prewarm"). Empty:
  // every exec starts its own interpreter.
  std::string prewarm;
  bool operator==(const SandboxSpec&) const = default;
};

struct ExecSpec {
  std::vector<std::string> argv;
  // Replaces an image's Entrypoint, as docker's --entrypoint does (empty: none), and then its
  // Cmd is not used either; image::ResolveSpecImage puts it in front of argv and clears it.
  std::optional<std::vector<std::string>> entrypoint;
  std::optional<std::string> stdin_data;  // bytes fed to the workload's stdin
  std::optional<std::string> stdin_file;  // or a host file read at run time
  std::map<std::string, std::string> env;
  std::optional<std::string> workdir;  // unset: the sandbox's
  ExecLimits limits;
};

struct RunSpec {
  SandboxSpec sandbox;
  ExecSpec exec;

  // Both kinds of limits at once, as the spec's "limits" names them.
  Limits limits() const { return Limits{sandbox.limits, exec.limits}; }
  void set_limits(const Limits& limits) {
    sandbox.limits = limits;
    exec.limits = limits;
  }
};

// Parses JSON; unknown fields and wrong types are errors naming the field. origin names the
// document in errors about the document as a whole ("spec file job.json: malformed JSON ...",
// "...: nesting deeper than 32 levels"). The document's "workdir" is the sandbox's.
Expected<RunSpec> ParseRunSpec(const std::string& json_text, std::string_view origin = "spec");
// Every field ParseRunSpec reads, the limits' as "limits.NAME": what a test of the front ends
// walks, so that a field added later without a path through each of them fails it.
std::vector<std::string> RunSpecFieldNames();
// Checks ranges, paths and combinations; does not touch the host except to stat the image,
// the volume sources and the stdin file. Errors name the spec's fields ("limits.memory_mib").
Expected<void> ValidateRunSpec(const RunSpec& spec);
Expected<void> ValidateSandboxSpec(const SandboxSpec& spec);
Expected<void> ValidateExecSpec(const ExecSpec& spec);
// An exec's fields but its command: the defaults a persistent sandbox gives each of its execs,
// which bring their own.
Expected<void> ValidateExecDefaults(const ExecSpec& spec);

std::string ToString(BackendKind kind);
// "sandbox", "root", or "UID:GID" for any other ids.
std::string ToString(const WorkloadUser& user);
std::string ToString(Accel accel);
Expected<Accel> ParseAccel(const std::string& name);
Expected<BackendKind> ParseBackendKind(const std::string& name);
// sandbox, root or UID[:GID] (the GID defaulting to the UID), each id at most kMaxWorkloadId.
Expected<WorkloadUser> ParseWorkloadUser(const std::string& text);
// "HOST:GUEST[:ro|rw]" as docker's -v; rw when the mode is omitted.
Expected<Mount> ParseVolume(const std::string& text);

// Bounds on each limit, shared by the validator and the CLI's help text.
inline constexpr int64_t kMinMemoryMiB = 16;
inline constexpr int64_t kMinFiles = 16;
inline constexpr int64_t kMaxTimeoutMs = 24LL * 3600 * 1000;
inline constexpr int64_t kMaxMemoryMiB = 256 * 1024;
inline constexpr int64_t kMaxPids = 65536;
inline constexpr int64_t kMaxStorageMiB = 1024 * 1024;
inline constexpr int64_t kMaxOutputBytes = 1LL << 30;
inline constexpr int64_t kMaxFiles = 1 << 20;
// SandboxSpec::root_files: an engine's files are a few hundred bytes, and the root's tmpfs holds
// them beside what the setup writes.
inline constexpr size_t kMaxRootFileBytes = 64 << 10;
inline constexpr size_t kMaxRootFiles = 16;
inline constexpr double kMaxCpus = 1024;
// The largest spec read, from a file or not; it bounds a spec's inline stdin too. A larger stdin
// goes in a stdin_file, which streams.
inline constexpr size_t kMaxSpecBytes = 64 << 20;
inline constexpr int64_t kMaxEgressConnections = 4096;

}  // namespace smolbox
