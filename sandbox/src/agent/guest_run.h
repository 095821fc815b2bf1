// One run's setup inside a microVM, on the host's "setup" message: its 9p shares and the
// workload cgroup, then the workload's namespaces (guest_namespaces.h) and, inside them, the
// workload's root, assembled by the same code as the namespace backend's, then pivot_root into
// it. The agent that serves the run moves in too, as it does in ns.
//
//   auto cgroup = SetUpGuestRun(*setup);   // after BootGuest()
#pragma once

#include "guest_cgroup.h"
#include "guest_protocol.h"
#include "smolbox/error.h"

namespace smolbox::agent {

Expected<WorkloadCgroup> SetUpGuestRun(const GuestSetup& setup);

}  // namespace smolbox::agent
