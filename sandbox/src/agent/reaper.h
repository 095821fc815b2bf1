// Ending and reaping workloads. As PID 1 of the sandbox the agent adopts every orphan, so it
// reaps every child, not just the ones it started.
//
//   KillWorkloads(workload.pid);                 // the whole tree, SIGKILL
//   ReapResult reaped = ReapExited(workload.pid); // never blocks
//   WaitTreeGone(workload.pid, signals, 2s);
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <optional>

#include "guest_cgroup.h"
#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::agent {

// Sends SIGKILL to every workload process: the whole sandbox when the agent is its PID 1,
// else the process group `pgid` (the session a workload's child makes with setsid).
// pgid <= 1 names no group: as PID 1 everything is still killed, otherwise nothing.
void KillWorkloads(pid_t pgid);

// As PID 1 with a zygote (zygote.h) beside the workloads, kill(-1) would end the zygote too.
// Every workload process is in the workload cgroup, though, from before its first instruction:
// while `cgroup` is set (null: no longer), KillWorkloads kills that cgroup instead, and a tree
// is gone once the cgroup is empty. The cgroup must outlive its use here.
void KillByCgroup(const WorkloadCgroup* cgroup);

// SIGCHLD as an fd for poll loops. Creating it blocks SIGCHLD in the agent.
class ChildSignals {
 public:
  static Expected<ChildSignals> Create();
  int fd() const { return fd_.get(); }
  // Consumes the pending notifications; the caller then reaps with ReapExited.
  void Drain() const;

 private:
  explicit ChildSignals(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

struct MainExit {
  int wait_status = 0;
  rusage usage{};  // the main process's own, from wait4
};

struct ReapResult {
  std::optional<MainExit> main;  // set when `main_pid` was among the reaped
  bool no_children_left = false;
};

// Reaps every child that has exited, without blocking.
ReapResult ReapExited(pid_t main_pid);

// After KillWorkloads: waits at most `bound` until no process of the tree is left (zombies
// count: they still hold their pid and group), reaping them as they go. False on time-out.
bool WaitTreeGone(pid_t pgid, const ChildSignals& signals, std::chrono::milliseconds bound);

}  // namespace smolbox::agent
