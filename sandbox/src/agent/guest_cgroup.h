// The workload's cgroup inside a microVM. The agent itself stays in the root cgroup, outside
// it, so a memory bomb kills the workload and never the agent that reports it.
//
//   auto cgroup = WorkloadCgroup::Create("/sys/fs/cgroup", "workload", limits);
//   auto before = cgroup->Read();
//   ... the child writes "0" to cgroup->procs_fd() before execve ...
//   cgroup->Judge(before, report);  // memory_limit on an OOM kill, "pids" when pids.max bit
#pragma once

#include <cstdint>
#include <string>

#include "exec_protocol.h"
#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::agent {

struct CgroupLimits {
  int64_t memory_bytes = 0;  // 0: none
  int64_t pids = 0;
  double cpus = 0;
};

struct CgroupCounters {
  int64_t oom_kills = 0;
  int64_t pids_max_events = 0;
  int64_t cpu_usec = 0;
};

class WorkloadCgroup {
 public:
  // Mounts nothing: `root` is a mounted cgroup2 hierarchy the agent may write, and `name` the
  // cgroup made in it ("workload", or "prewarm" for a zygote's, zygote.h).
  static Expected<WorkloadCgroup> Create(const std::string& root, const std::string& name, const CgroupLimits& limits);

  // O_WRONLY, CLOEXEC: the child joins by writing "0", and execve closes it.
  int procs_fd() const { return procs_.get(); }
  CgroupCounters Read() const;
  int64_t CpuUsec() const { return Field("cpu.stat", "usage_usec"); }
  // Adds what only the cgroup saw to the agent's own account of one exec.
  void Judge(const CgroupCounters& before, ExecReport& report) const;
  // SIGKILL to every process in it at once, forks in flight included (cgroup.kill).
  void Kill() const;
  // Whether any process is left in it; zombies are not, though they still wait to be reaped.
  bool Populated() const { return Field("cgroup.events", "populated") != 0; }

 private:
  WorkloadCgroup(UniqueFd dir, UniqueFd procs, UniqueFd kill)
      : dir_(std::move(dir)), procs_(std::move(procs)), kill_(std::move(kill)) {}
  int64_t Field(const char* file, const char* key) const;
  UniqueFd dir_;
  UniqueFd procs_;
  // Opened, as procs_, while the agent is still the guest's root: once it serves from the
  // workload's user namespace it may no longer open the cgroup's files for writing.
  UniqueFd kill_;
};

}  // namespace smolbox::agent
