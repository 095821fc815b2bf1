// Where this process's cgroup hierarchies are mounted, and where in each it lives: read from
// /proc/self/mountinfo and /proc/self/cgroup. The runtime places its run cgroups by it, the host
// report judges the host by it (from a fixture's copies of the two files), and the verifier
// places the cgroup that holds a launched sandbox by it.
//
//   CgroupHierarchies h = DiscoverCgroupHierarchies();
//   if (h.v2_mount) ...                               // "/sys/fs/cgroup"
//   auto memory = h.v1_mount.find("memory");          // hybrid hosts: "/sys/fs/cgroup/memory"
//   std::string mine = *h.v2_mount + h.v2_self;       // this process's own v2 cgroup
#pragma once

#include <map>
#include <optional>
#include <string>

namespace smolbox {

struct CgroupHierarchies {
  std::optional<std::string> v2_mount;          // the first cgroup2 mount
  std::string v2_self;                          // our cgroup in v2, "" for the root
  std::map<std::string, std::string> v1_mount;  // controller -> mount point, known controllers only
  std::map<std::string, std::string> v1_self;   // controller -> our cgroup, "" for the root
};

// From the text of a mountinfo and of a /proc/PID/cgroup file. Malformed lines are skipped; a
// mount point's octal escapes (\040 for a space) are decoded.
CgroupHierarchies ParseCgroupHierarchies(const std::string& mountinfo, const std::string& self_cgroup);

// This process's, read live.
CgroupHierarchies DiscoverCgroupHierarchies();

}  // namespace smolbox
