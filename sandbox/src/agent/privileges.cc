#include "privileges.h"

#include <grp.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mutant.h"

namespace smolbox::agent {
namespace {

// Empty bounding set: no later execve, of a setuid or file-capability binary or of anything
// run as uid 0, can give a capability back. Needs CAP_SETPCAP, so it runs before setresuid.
SetupFailure ClearBoundingSet() noexcept {
  for (int cap = 0; cap <= 63; ++cap) {
    int held = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
    if (held < 0) break;  // EINVAL: past the kernel's last capability
    if (held == 1 && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
      return Failed(SetupStep::kCapBound);
    }
  }
  return {};
}

SetupFailure SwitchUser(uid_t uid, gid_t gid) noexcept {
  // A rootless user namespace may deny setgroups (/proc/self/setgroups is "deny"); the
  // groups then are the ones the host mapped in, which the workload cannot use anyway.
  if (setgroups(0, nullptr) != 0 && errno != EPERM) return Failed(SetupStep::kSetgroups);
  if (setresgid(gid, gid, gid) != 0) return Failed(SetupStep::kSetresgid);
  if (setresuid(uid, uid, uid) != 0) return Failed(SetupStep::kSetresuid);
  return {};
}

SetupFailure ClearCapabilities() noexcept {
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) {
    return Failed(SetupStep::kCapAmbient);
  }
  // Raw capset: setresuid(0) keeps root's capabilities, and libcap is not worth a dependency.
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capset, &header, data) != 0) return Failed(SetupStep::kCapset);
  return {};
}

}  // namespace

SetupFailure DropPrivileges(uid_t uid, gid_t gid) noexcept {
  if (SMOLBOX_PROTECTED("cap_drop")) {
    if (SetupFailure f = ClearBoundingSet()) return f;
  }
  if (SMOLBOX_PROTECTED("uid_switch")) {
    if (SetupFailure f = SwitchUser(uid, gid)) return f;
  }
  if (SMOLBOX_PROTECTED("cap_drop")) {
    if (SetupFailure f = ClearCapabilities()) return f;
  }
  if (SMOLBOX_PROTECTED("no_new_privs") && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return Failed(SetupStep::kNoNewPrivs);
  }
  return {};
}

}  // namespace smolbox::agent
