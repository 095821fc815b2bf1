// The workload's cgroup inside a microVM. The agent itself stays in the root cgroup, outside
// it, so a memory bomb kills the workload and never the agent that reports it.
//
//   auto cgroup = WorkloadCgroup::Create("/sys/fs/cgroup", limits);
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
  // Mounts nothing: `root` is a mounted cgroup2 hierarchy the agent may write.
  static Expected<WorkloadCgroup> Create(const std::string& root, const CgroupLimits& limits);

  // O_WRONLY, CLOEXEC: the child joins by writing "0", and execve closes it.
  int procs_fd() const { return procs_.get(); }
  CgroupCounters Read() const;
  int64_t CpuUsec() const { return Field("cpu.stat", "usage_usec"); }
  // Adds what only the cgroup saw to the agent's own account of one exec.
  void Judge(const CgroupCounters& before, ExecReport& report) const;

 private:
  WorkloadCgroup(UniqueFd dir, UniqueFd procs) : dir_(std::move(dir)), procs_(std::move(procs)) {}
  int64_t Field(const char* file, const char* key) const;
  UniqueFd dir_;
  UniqueFd procs_;
};

}  // namespace smolbox::agent
