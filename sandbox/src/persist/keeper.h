// The keeper: the process that holds a persistent sandbox. `smolbox create` forks it; it
// starts the sandbox (a Session: ns keeps its namespaces, mounts, cgroup and agent; vm keeps
// its QEMU and agent), then serves exec and stop requests on the sandbox's control socket
// until stopped. It outlives the CLI that created it.
//
// Execs run one at a time: `smolbox exec` holds the sandbox's lock for an exec's length, and a
// second exec meanwhile is told the sandbox is busy rather than queued behind it.
//
// When the agent or VM dies on its own, or the keeper gets SIGTERM, SIGINT or SIGHUP, the
// keeper tears the sandbox down, writes why into `dead`, and exits; `smolbox rm` then removes
// what is left. A keeper killed outright takes its agent or QEMU with it (PDEATHSIG), and the
// next sweep (shared::SweepStaleRuns) removes its run directory and cgroups.
#pragma once

#include <string>

#include "smolbox/result.h"
#include "smolbox/spec.h"

namespace smolbox::persist {

// Creates the sandbox `name` from spec and returns once it is ready or has failed: the result
// is the setup's (backend, isolation, timings, warnings), with status kExited on success and
// kSetupError, and nothing left behind, on failure. Each exec starts from exec_defaults (env,
// workdir, limits; its argv is the exec's own), which the exec's order adds to and overrides.
//
// lifeline_fd, unless -1, ties the sandbox to whoever holds the other end (`smolbox serve`):
// once it is readable or hung up, the keeper tears the sandbox down as on SIGTERM. The keeper
// keeps its own copy; the caller's stays the caller's.
RunResult CreateSandbox(const std::string& name, const SandboxSpec& spec, const ExecSpec& exec_defaults,
                        int lifeline_fd = -1);

}  // namespace smolbox::persist
