// The cgroup that holds one launched tree, daemons included. A process group or a session is
// only a convention that a daemon can leave with setsid(); a cgroup is not, so with one the net
// lists and kills every process a launch started. v2 where the host has it (cgroup.kill kills the
// tree at once), each v1 hierarchy that holds a needed controller otherwise; only root can make
// one. What could not be set up is in problems(), which the net turns into its warning.
//
//   NetCgroup cgroup(limits);              // created now, with the net's pids and memory limits
//   if (cgroup.holds()) SMOLBOX_TRY(cgroup.Add(child));   // before the child may exec
//   cgroup.KillAndWait();                  // ~NetCgroup does too, then removes the directories
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "cgroup_hierarchies.h"
#include "launch/launcher.h"

namespace smolvm_check {

class NetCgroup {
 public:
  explicit NetCgroup(const NetLimits& limits);
  ~NetCgroup();
  NetCgroup(const NetCgroup&) = delete;
  NetCgroup& operator=(const NetCgroup&) = delete;

  bool holds() const { return !dirs_.empty(); }
  const std::vector<std::string>& problems() const { return problems_; }
  const std::vector<std::string>& paths() const { return paths_; }
  Expected<void> Add(pid_t pid) const;
  std::vector<pid_t> Procs() const;
  // One pass: cgroup.kill where there is one, otherwise SIGKILL to every listed process.
  void Kill() const;
  // Kill() until every directory is empty, since on v1 a fork may race the listing.
  void KillAndWait() const;

 private:
  struct Dir {
    std::string path;
    int version;
  };
  void CreateV2(const smolbox::CgroupHierarchies& h);
  std::optional<Dir> PlaceController(const smolbox::CgroupHierarchies& h, const std::string& controller);

  std::string name_;
  std::string v2_base_;
  std::vector<Dir> dirs_;  // each one distinct; v2 first when there is one
  std::vector<std::string> paths_;
  std::vector<std::string> problems_;
};

}  // namespace smolvm_check
