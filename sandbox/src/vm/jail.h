// QEMU confined as Firecracker's jailer confines Firecracker: its own user, mount, pid, net,
// ipc and uts namespaces, the run's cgroup, no capabilities, no_new_privs, and an
// unprivileged host uid. Within that QEMU's own -sandbox seccomp filter applies.
//
//   JailPlan plan{.argv = QemuArgv(...), .keep_fds = {...}, .console_fd = log, ...};
//   auto qemu = StartJailed(plan, cgroup);   // QEMU is running; its pidfd is in qemu->pidfd
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "cgroup.h"
#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::vm {

struct JailPlan {
  std::vector<std::string> argv;
  std::vector<int> keep_fds;  // inherited by QEMU (the paths in argv name them)
  int console_fd = -1;        // QEMU's stdout and stderr: the guest console and QEMU's errors
  uid_t host_uid = 0;         // what QEMU is on the host
  gid_t host_gid = 0;
  // What QEMU is inside its user namespace. Its 9p shares show files as owned by this uid, so
  // it is the guest uid behind the workload's: kGuestIdBase + 1000 for the sandbox user,
  // kGuestIdBase for root.
  uid_t inside_uid = 0;
  gid_t inside_gid = 0;
};

struct JailedProcess {
  pid_t pid = -1;
  UniqueFd pidfd;
};

// Returns once QEMU has been exec'd, or with the step that failed.
Expected<JailedProcess> StartJailed(const JailPlan& plan, shared::Cgroup& cgroup);

}  // namespace smolbox::vm
