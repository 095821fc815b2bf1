// Becoming the workload's user with no capabilities and no way to gain any.
//
// The `root` user is root in its user namespace (or VM) only and still gets no capabilities:
// a capability is exactly what an exploit looks for first.
//
//   if (SetupFailure f = DropPrivileges(uid, gid)) ReportAndExit(error_fd, f);   // child
#pragma once

#include <sys/types.h>

#include "setup_failure.h"

namespace smolbox::agent {

// Async-signal-safe. Ends with no_new_privs set, as loading the seccomp filter requires.
SetupFailure DropPrivileges(uid_t uid, gid_t gid) noexcept;

}  // namespace smolbox::agent
