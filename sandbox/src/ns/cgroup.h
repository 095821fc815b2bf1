// One cgroup per run for memory, cpu and pids, on whichever hierarchy can hold it.
//
// cgroup v2 is used where a writable subtree has the controller (GitHub's runners); otherwise
// each controller falls back to its v1 hierarchy (hybrid hosts). A controller that neither can
// hold is reported missing, and the caller enforces that limit more weakly (rlimits) and warns.
//
//   auto cg = Cgroup::Create(run_id, {.memory_bytes = 128 << 20, .cpus = 1, .pids = 32});
//   cg.AddProcess(child_pid);
//   ... cg.OomKills(), cg.CpuUsageMs() ...
//   // the destructor kills whatever is left and removes the directories
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "smolbox/error.h"

namespace smolbox::ns {

struct CgroupLimits {
  int64_t memory_bytes = 0;
  double cpus = 0;
  int64_t pids = 0;
};

class Cgroup {
 public:
  static Cgroup Create(const std::string& run_id, const CgroupLimits& limits);
  Cgroup(Cgroup&& other) noexcept;
  Cgroup& operator=(Cgroup&&) = delete;
  ~Cgroup();

  bool holds_memory() const { return memory_.has_value(); }
  bool holds_cpu() const { return cpu_.has_value(); }
  bool holds_pids() const { return pids_.has_value(); }
  // Why each missing controller could not be used, for the result's warnings.
  const std::vector<std::string>& problems() const { return problems_; }
  std::string Describe() const;

  Expected<void> AddProcess(pid_t pid);
  std::optional<int64_t> CpuUsageMs() const;
  int64_t OomKills() const;
  int64_t PeakMemoryBytes() const;
  // How often a fork failed at the pids limit.
  int64_t PidsMaxEvents() const;
  // SIGKILLs every process in the cgroup.
  void KillAll() const;

 private:
  struct Dir {
    std::string path;
    int version;
  };
  Cgroup() = default;
  void ApplyLimits(const CgroupLimits& limits);
  void Destroy();

  std::optional<Dir> memory_, cpu_, cpuacct_, pids_;
  std::vector<std::string> problems_;
};

// Removes the cgroups of a run whose runtime died, by run id.
void RemoveStaleCgroups(const std::string& run_id);

}  // namespace smolbox::ns
