// The workload's side of fork: the checklist from fork to execve.
//
// Everything the child needs is prepared before fork, so that it allocates nothing and calls
// only async-signal-safe functions. A failing step is reported over the error pipe and the
// child exits; see setup_failure.h.
//
//   if (pid == 0) RunChild(plan);   // never returns
#pragma once

#include <sys/types.h>

#include "rlimits.h"
#include "seccomp_policy.h"

namespace smolbox::agent {

struct ChildPlan {
  // The child's ends of the stdio pipes and the error pipe; all above 2.
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  int error_fd = -1;
  const char* cwd = "";  // empty: stay where the agent is
  uid_t uid = 0;
  gid_t gid = 0;
  RlimitPlan rlimits;
  const SeccompProgram* seccomp = nullptr;
  const char* argv0 = "";  // as the request spelled it, for error messages
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  // Paths to try in order (the PATH search, done by the agent); null-terminated.
  const char* const* candidates = nullptr;
  bool searched_path = false;  // argv0 had no '/'
  // In a microVM: the workload cgroup's cgroup.procs, which the child joins first. -1: none.
  int cgroup_procs_fd = -1;
  // Set for the zygote (zygote.h): the cgroup its cgroup namespace is rooted at, joined before
  // cgroup_procs_fd, so that its forks, moved there, see their own cgroup as "/". -1: none.
  int cgroup_ns_root_procs_fd = -1;
};

// Exit codes of a child that never became the workload (after timeout(1) and env(1)).
inline constexpr int kExitSetupFailed = 125;
inline constexpr int kExitCannotExecute = 126;
inline constexpr int kExitNotFound = 127;

[[noreturn]] void RunChild(const ChildPlan& plan) noexcept;

}  // namespace smolbox::agent
