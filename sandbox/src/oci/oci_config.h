// A bundle's config.json (the OCI runtime spec) as a smolbox sandbox: what `smolbox oci create`
// runs. Every field is mapped, or replaced by smolbox's own stricter confinement (and said so
// in the runtime's log), or refused with an error naming the field; none is silently dropped.
// docs/oci.md has the whole table.
//
//   auto container = smolbox::oci::ParseOciConfig(text, "/var/lib/x/bundle");
//   if (!container) { ...container.error().where == "linux.resources.memory.limit"... }
//   container->run.sandbox.image;   // "/var/lib/x/bundle/rootfs"
//   container->notes;               // "process.capabilities: replaced by smolbox's: none"
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "oci_hooks.h"
#include "smolbox/error.h"
#include "smolbox/spec.h"

namespace smolbox::oci {

// The versions of the runtime spec this runtime reads, as `features` reports them.
inline constexpr const char* kOciVersionMin = "1.0.0";
inline constexpr const char* kOciVersionMax = "1.2.0";
// config.json is small (runc's are a few KiB); a larger one is not a bundle.
inline constexpr size_t kMaxConfigBytes = 4 << 20;

// Annotations that carry what OCI has no field for.
inline constexpr const char* kBackendAnnotation = "io.smolbox.backend";  // ns | vm
inline constexpr const char* kStorageAnnotation =
    "io.smolbox.storage-mib";  // SandboxLimits::storage_mib
inline constexpr const char* kOutputAnnotation = "io.smolbox.output-bytes";  // per stream
inline constexpr const char* kTimeoutAnnotation =
    "io.smolbox.timeout-ms";                                           // the process's wall time
inline constexpr const char* kEgressAnnotation = "io.smolbox.egress";  // the spec's "egress" JSON
// The vm backend's accelerator: kvm, tcg (emulation, slow) or auto (KVM when usable).
inline constexpr const char* kAccelAnnotation = "io.smolbox.accel";
// The process tree's CPU time in all, in ms: RLIMIT_CPU is per process and in whole seconds.
inline constexpr const char* kCpuTimeAnnotation = "io.smolbox.cpu-ms";

struct OciContainer {
  // The sandbox (rootfs, mounts, user, limits, hostname, the engine's netns) and its one process.
  RunSpec run;
  bool terminal = false;  // process.terminal: the engine passes a console socket
  std::map<std::string, std::string> annotations;  // all of them, as state reports them
  Hooks hooks;
  // The config asks for a network namespace of the container's own and has hooks to set it up
  // (docker's): the runtime makes it, as runc does, where the hooks find it by the container's
  // pid, and the sandbox is born in it.
  bool own_network_namespace = false;
  // What smolbox replaced with its own confinement, one line each, for the runtime's log.
  std::vector<std::string> notes;
};

// bundle is the bundle directory, absolute; root.path is resolved against it. backend, unless
// kAuto, is the runtime's --backend, which the backend annotation may not contradict. Errors
// name the config.json field ("process.args", "linux.resources.pids.limit",
// "annotations.io.smolbox.egress.allow_hosts[0]").
Expected<OciContainer> ParseOciConfig(const std::string& text, const std::string& bundle,
                                      BackendKind backend = BackendKind::kAuto);

// A second process in a running container: `exec --process`'s process.json, which is a
// config's "process" object alone, mapped as ParseOciConfig maps that object. Its limits are
// the container's (timeout, output); errors name "process.<field>".
struct OciProcess {
  ExecSpec exec;
  WorkloadUser user;
  bool terminal = false;
  std::vector<std::string> notes;
};
Expected<OciProcess> ParseOciProcess(const std::string& text, const RunSpec& container);

// runc's rule for a container ID: letters, digits and "_+-.", not "." or "..", at most 1024.
Expected<void> CheckContainerId(const std::string& id);

}  // namespace smolbox::oci
