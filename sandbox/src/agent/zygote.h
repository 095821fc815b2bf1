// The opt-in zygote of `smolbox create --prewarm python` (docs/performance.md): one Python
// interpreter, started and with common modules imported, that forks a process for each exec
// that runs python3 on a script or -c. Under emulation most of an exec's time is the
// interpreter's start-up, translated again for every new process; a fork of a started one
// skips it, and its code is already translated.
//
// The exec boundary holds: each exec is a new process, in the workload cgroup before its first
// instruction, with its own stdio, cwd, environment, rlimits, timeout and kill, waited for by
// the agent as any workload. The zygote runs as the workload, with its seccomp policy, in a
// cgroup of its own (kZygoteMemoryBytes, kZygotePids), and is not dumpable, so no exec can
// ptrace it or write its memory. What every exec shares is the zygote's state at fork:
// its imported modules, its address-space layout and its hash seed (python_zygote_program.h).
//
//   auto zygote = PythonZygote::Start(setup, seccomp, std::move(prewarm_cgroup),
//   workload.procs_fd()); if (zygote->Accepts(request))
//     if (auto started = zygote->Spawn(request, workload_cgroup.procs_fd())) ...  // else plain
#pragma once

#include <sys/types.h>

#include <expected>
#include <optional>
#include <string>

#include "exec.h"
#include "exec_protocol.h"
#include "guest_cgroup.h"
#include "guest_protocol.h"
#include "seccomp_policy.h"
#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::agent {

// The zygote's own cgroup, beside the workload's: what it may hold on top of the sandbox's
// memory limit (the guest's overhead has room for it), and its forks in flight.
inline constexpr int64_t kZygoteMemoryBytes = 64 << 20;
inline constexpr int64_t kZygotePids = 16;

class PythonZygote {
 public:
  // Starts it as a workload of the setup's uid, in `cgroup`, with the environment a default exec
  // gets, and its cgroup namespace rooted at the workload cgroup, where its forks run. It is
  // ready once it has imported its modules; until then execs run as before.
  static Expected<PythonZygote> Start(const GuestSetup& setup, const SeccompProgram& seccomp,
                                      WorkloadCgroup cgroup, int workload_procs_fd);

  // Whether the zygote is ready and can run this exec as it would run: python3 (as the
  // request's PATH finds it) on a script or -c, as the zygote's uid, with nothing that Python
  // reads at its start (PYTHON*, HOME, the locale, TZ) differing from the zygote's.
  bool Accepts(const ExecRequest& request);

  // Forks the exec's process and moves it into the workload cgroup. nullopt: run the exec as
  // before; its request was too large to send, or the zygote failed before any of the exec's
  // code ran (it is then stopped for good).
  std::optional<std::expected<Workload, ExecReport>> Spawn(const ExecRequest& request,
                                                           int workload_procs_fd);

 private:
  PythonZygote(UniqueFd control, UniqueFd ready, WorkloadCgroup cgroup, ExecRequest start,
               std::string executable)
      : control_(std::move(control)),
        ready_(std::move(ready)),
        cgroup_(std::move(cgroup)),
        start_(std::move(start)),
        executable_(std::move(executable)) {}
  bool Ready();
  void Stop();

  UniqueFd control_;  // SOCK_SEQPACKET, the zygote's fd 0
  UniqueFd ready_;    // its stdout: "r" once it serves
  bool ready_seen_ = false;
  bool stopped_ = false;
  WorkloadCgroup cgroup_;
  ExecRequest start_;       // how it was started: its uid, gid and environment
  std::string executable_;  // the interpreter, resolved
};

}  // namespace smolbox::agent
