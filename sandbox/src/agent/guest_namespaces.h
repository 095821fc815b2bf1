// The workload's namespaces inside a microVM. The guest kernel is the inner wall, so nothing
// that runs there may be its root: the workload gets a user namespace whose ids are backed by
// guest ids from kGuestIdBase up (its root cannot write a global sysctl, core_pattern, or
// sysrq, nor load a module), and pid, mount, ipc and uts namespaces of its own, so it sees
// neither the guest's init nor the kernel's threads.
//
// The agent splits in two at setup. The guest's init stays behind as the kernel's real root:
// it only waits for the other half and powers the VM off when that ends. The other half
// returns from EnterWorkloadNamespaces() as PID 1 and root of the new namespaces, builds the
// workload's root there and serves the run, as the agent of an ns sandbox does.
//
//   if (auto ok = EnterWorkloadNamespaces(); !ok) return ok;   // only the serving half returns
#pragma once

#include "smolbox/error.h"

namespace smolbox::agent {

Expected<void> EnterWorkloadNamespaces();

}  // namespace smolbox::agent
