// One cgroup per run for memory, cpu and pids, on whichever hierarchy can hold it.
//
// cgroup v2 is used where a writable subtree has the controller (GitHub's runners); otherwise
// each controller falls back to its v1 hierarchy (hybrid hosts). A controller that neither can
// hold is reported missing, and the caller enforces that limit more weakly (rlimits) and warns.
//
//   auto cg = Cgroup::Create(run_id, {.memory_bytes = 128 << 20, .cpus = 1, .pids = 32});
//   CgroupEntry entry = cg.OpenEntry();
//   long pid = entry.Clone(CLONE_NEWUSER | CLONE_PIDFD | SIGCHLD, &pidfd);
//   if (pid == 0) { entry.JoinSelf(); ...tell the parent, await its go... }
//   cg.EnsureHolds(pid);  // once the child said it is done: moves it where it is missing
//   ... cg.OomKills(), cg.CpuUsageMs() ...
//   // the destructor kills whatever is left and removes the directories
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::shared {

struct CgroupLimits {
  int64_t memory_bytes = 0;
  double cpus = 0;
  int64_t pids = 0;
  // The CPU's relative weight against other cgroups, as v1's cpu.shares (2 to 262144; v2's
  // cpu.weight is converted as runc does); 0 leaves the kernel's default.
  int64_t cpu_shares = 0;
};

// A new child's cheap way into a run's cgroup, opened by the parent before the clone.
//
// Moving a process in from outside (a pid written to cgroup.procs) takes the kernel's
// thread-group lock for writing, which waits for an RCU grace period on every hierarchy:
// milliseconds per run. A child born in its v2 cgroup (clone3 CLONE_INTO_CGROUP) moves nothing,
// and a single-threaded child that writes "0" to a v1 `tasks` file moves only itself, without
// that lock. The kernel checks such a write against the credentials that opened the file, so
// it works from inside the child's new user namespace.
class CgroupEntry {
 public:
  // Forks (no CLONE_VM) with the given flags, born in the v2 cgroup where there is one.
  // Returns the child's pid, 0 in the child, or -1 with errno.
  long Clone(unsigned long flags, int* pidfd) const;
  // In the child, still single-threaded, before it runs anything of its own. Allocates
  // nothing. A failed move is left to the parent's EnsureHolds.
  void JoinSelf();

 private:
  friend class Cgroup;
  std::vector<UniqueFd> v1_tasks_;
  UniqueFd v2_dir_;
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

  CgroupEntry OpenEntry() const;
  // Moves pid into every hierarchy of the run that /proc/<pid>/cgroup does not show it in.
  Expected<void> EnsureHolds(pid_t pid);
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
    std::string in_hierarchy;  // the path as /proc/<pid>/cgroup shows it
  };
  // Each distinct directory once, with the controller it was made for.
  std::vector<std::pair<const char*, const Dir*>> Dirs() const;
  Cgroup() = default;
  void ApplyLimits(const CgroupLimits& limits);
  void Destroy();

  std::optional<Dir> memory_, cpu_, cpuacct_, pids_;
  std::vector<std::string> problems_;
};

// Removes the cgroups of a run whose runtime died, by run id.
void RemoveStaleCgroups(const std::string& run_id);

}  // namespace smolbox::shared
