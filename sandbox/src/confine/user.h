// The sandbox's user namespace: who the workload is inside, and which host ids that maps to.
//
// A root runtime maps 65536 ids onto a range far above any real account, so even uid 0 inside
// is an unprivileged stranger on the host. A rootless runtime can map only its own uid, onto
// the workload's uid. Inside a microVM the agent gives the workload a user namespace the same
// way (MappedIdentity), so that its root is no root of the guest kernel either.
#pragma once

#include <sys/types.h>

#include <string>

#include "smolbox/error.h"
#include "smolbox/spec.h"

namespace smolbox::confine {

inline constexpr uid_t kSandboxUid = 1000;
inline constexpr gid_t kSandboxGid = 1000;
// Host ids [kHostIdBase, kHostIdBase + 65536) back the ids of a root runtime's sandboxes.
inline constexpr uid_t kHostIdBase = 2000000000;

struct Identity {
  uid_t uid = 0;  // the workload's, inside
  gid_t gid = 0;
  uid_t host_uid = 0;  // what that uid is on the host
  gid_t host_gid = 0;
  std::string uid_map;
  std::string gid_map;
  bool rootless = false;
  // The setup process must switch to uid 0 inside: its host uid 0 is not mapped.
  bool setup_becomes_root = false;
};

Identity PlanIdentity(const WorkloadUser& user);
// 65536 ids from base up back the namespace's ids 0-65535; its setup process starts as an
// unmapped uid and must become root inside.
Identity MappedIdentity(const WorkloadUser& user, uid_t base);
// Written by the runtime for its child, which waits until they are in place.
Expected<void> WriteIdMaps(pid_t child, const Identity& identity);
// Switches the setup process to uid and gid 0 inside, when setup_becomes_root says so.
Expected<void> BecomeSetupRoot(const Identity& identity);
// The agent's bounding set, just before it serves: it keeps only what starting workloads as
// another uid and killing them needs (none at all when it runs as a non-zero uid), so a
// workload that took the agent over could not take more.
Expected<void> LimitAgentBoundingSet();

}  // namespace smolbox::confine
