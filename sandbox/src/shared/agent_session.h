// The host's side of a started sandbox's execs, the same for both backends: the request built
// from the spec, sent to the agent, the monitor loop until the agent's report (or the host's
// backstop), the result judged from that report and the sandbox's cgroup, and the copy-back of
// rw volumes after every exec.
//
// A backend starts its sandbox (namespaces around an agent, or a VM whose /init is the agent)
// and derives its session from this one, saying only what differs in an AgentSandbox: the
// process whose end is the sandbox's, the cgroup that holds the workload (none for a VM: the
// guest's agent holds it and reports on it), the backstop's grace, the names in the result.
//
//   class NsSession final : public shared::AgentSession {
//    public:
//     explicit NsSession(std::unique_ptr<Sandbox> box) : AgentSession(Describe(*box)), box_(std::move(box)) {}
//     ~NsSession() override { shared::StopAgent(...); }
//    private:
//     std::unique_ptr<Sandbox> box_;  // what the AgentSandbox points into
//   };
//   RunResult r = session->Exec(exec_spec, io, cancel_fd);
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cgroup.h"
#include "gateway.h"
#include "monitor.h"
#include "smolbox/backend.h"
#include "storage.h"
#include "workspace.h"

namespace smolbox::shared {

// What a backend's sandbox is to its execs. Every pointer and descriptor stays the backend's
// and must outlive the session.
struct AgentSandbox {
  std::string backend;  // the result's backend and isolation
  std::string isolation;
  const SandboxSpec* spec = nullptr;  // what it was started with
  int channel = -1;                   // the agent's end of the channel
  int pidfd = -1;            // the process whose end is the sandbox's: the agent, or QEMU
  std::string death_reason;  // what that end means, for the user
  uid_t uid = 0;             // the workload's, inside
  gid_t gid = 0;
  // Holds the workload: its counters judge each exec (OOM kills, CPU time, pids, peak memory),
  // and a limit it does not hold gets a weaker rlimit stand-in. Null where the agent holds the
  // workload's cgroup itself and reports on it.
  const Cgroup* cgroup = nullptr;
  // With no cgroup to ask (an exec attached to a running sandbox, which is in that sandbox's
  // cgroup but cannot see what it holds): the memory and pids stand-ins are set all the same,
  // so that a limit the cgroup may not hold is never left unbounded.
  bool stand_ins_without_cgroup = false;
  int64_t grace_ms = kBackstopGraceMs;  // the host's backstop past the exec's timeout
  std::string backstop_warning;         // the result's warning when the backstop fired
  const Storage* storage = nullptr;     // where rw volumes are copied back from
  const std::vector<HostVolume>* volumes = nullptr;
  // With egress: what it decided during each exec goes into the exec's result.
  net::Gateway* gateway = nullptr;
};

class AgentSession : public Session {
 public:
  explicit AgentSession(AgentSandbox sandbox) : sandbox_(std::move(sandbox)) {}

  RunResult Exec(const ExecSpec& spec, const ExecIo& io, int cancel_fd) final;
  int death_fd() const final { return sandbox_.pidfd; }
  std::string DeathReason() const final;

 private:
  AgentSandbox sandbox_;
  int execs_ = 0;
};

// The agent's request for spec's exec: argv, a clean environment with spec's env over it, its
// workdir or the sandbox's, the workload's ids, the exec's limits, and stand-ins for the
// sandbox's limits that `cgroup` (when given) cannot hold.
ExecRequest MakeExecRequest(const ExecSpec& spec, const AgentSandbox& sandbox, const ExecIo& io);
// Where a limit is enforced more weakly than asked: a missing cgroup controller, RAM-backed
// storage.
void WarnWeakLimits(const Cgroup* cgroup, const Storage* storage, RunResult& result);
// A setup that failed: the result so far, with status setup_error and the error's text.
RunResult SetupFailure(RunResult result, const Error& error);

// Ends a sandbox whose agent may still be up: closing the channel tells the agent to end (it
// kills what is left of the workload, or powers the guest off); what has not ended after
// wait_ms is killed. Reaps pid.
void StopAgent(int channel, int pidfd, pid_t pid, int wait_ms);
// SIGKILLs the process behind pidfd (when valid) and reaps pid (when positive).
void KillAndReap(int pidfd, pid_t pid);

}  // namespace smolbox::shared
