// Starting one workload: pipes, fork, the child's checklist, and waiting until it reaches
// execve (or reports the step that failed).
//
//   auto workload = StartWorkload(request, seccomp);
//   if (!workload) return workload.error();   // a finished ExecReport: setup_error, ...
//   ExecReport report = PumpExec(connection, signals, request, std::move(*workload));
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <expected>
#include <string>
#include <string_view>

#include "exec_protocol.h"
#include "smolbox/error.h"
#include "seccomp_policy.h"
#include "unique_fd.h"

namespace smolbox::agent {

// Where an exec's command is looked for when its request's environment has no PATH (glibc's
// execvp has a similar default).
inline constexpr std::string_view kDefaultPath = "/usr/local/bin:/usr/bin:/bin";

// The PATH an exec's command is searched on: its request's, never the agent's.
std::string_view SearchPathOf(const ExecRequest& request);

struct Workload {
  pid_t pid = -1;  // also its process group: the child calls setsid()
  // The agent's ends of the workload's stdio, non-blocking.
  UniqueFd stdin_fd;
  UniqueFd stdout_fd;
  UniqueFd stderr_fd;
  std::chrono::steady_clock::time_point started;  // just before fork
  rusage children_before{};  // RUSAGE_CHILDREN before fork: the base of the usage delta
};

// The report of an exec that never ran: status and why, and the time spent since `started`.
ExecReport ExecFailure(Status status, std::string error, std::chrono::steady_clock::time_point started);

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

// stdin, stdout, stderr, and the child's error pipe. The agent's stdio ends are non-blocking.
struct WorkloadPipes {
  Pipe in, out, err, error;
};

Expected<Pipe> MakePipe();  // both ends CLOEXEC
Expected<WorkloadPipes> MakeWorkloadPipes();

// A long-lived helper started as a workload is (zygote.h): the same checklist from fork to
// execve, with the stdio fds the caller chose (above 2), in its own cgroup, its cgroup
// namespace rooted at another (ChildPlan). Its pid once it reached execve.
Expected<pid_t> StartHelper(const ExecRequest& request, const SeccompProgram& seccomp, int cgroup_procs_fd,
                            int cgroup_ns_root_procs_fd, int stdin_fd, int stdout_fd, int stderr_fd);

// The error is the exec's final report: setup_error when a step in the child failed (naming
// the step and errno), internal_error when the agent could not even fork.
// cgroup_procs_fd: in a microVM, the workload cgroup the child joins; -1 elsewhere.
std::expected<Workload, ExecReport> StartWorkload(const ExecRequest& request,
                                                  const SeccompProgram& seccomp,
                                                  int cgroup_procs_fd = -1);

}  // namespace smolbox::agent
