// Without a cgroup, the launched tree is what shares the leader's process group or session:
// found by scanning /proc, since nothing else lists it. A daemon that calls setsid() leaves
// this tree, which is why the net prefers a cgroup (net_cgroup.h) and warns without one.
//
//   for (pid_t pid : ScanTree(leader)) KillIfInTree(pid, leader);
#pragma once

#include <sys/types.h>

#include <vector>

namespace smolvm_check {

// The live processes other than this one whose group or session is leader's; the leader is
// among them until it exits.
std::vector<pid_t> ScanTree(pid_t leader);

// SIGKILLs pid if it is still in leader's tree. It is held by a pidfd and checked again, so
// that a pid recycled since the scan is never signalled.
void KillIfInTree(pid_t pid, pid_t leader);

}  // namespace smolvm_check
