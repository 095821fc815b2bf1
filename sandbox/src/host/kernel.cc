// Kernel features the backends layer on: seccomp filters and Landlock for the ns backend, and
// user xattrs on tmpfs for the vm backend without root.
#include <fmt/format.h>
#include <linux/landlock.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "probe.h"

namespace smolbox::host {
namespace {

Check SeccompCheck(HostView& view, Findings& found) {
  const char* name = "seccomp filters";
  if (auto actions = view.Read("/proc/sys/kernel/seccomp/actions_avail")) {
    found.seccomp = HasWord(*actions, "errno") && HasWord(*actions, "kill_process");
    if (found.seccomp) return Pass(name, fmt::format("actions: {}", Trim(*actions)));
    return Fail(name,
                fmt::format("actions: {}; the agent needs errno and kill_process", Trim(*actions)));
  }
  // Kernels before 4.14 have no actions_avail; the Seccomp field still says filters exist.
  auto status = view.Read("/proc/self/status");
  found.seccomp = status && status->find("\nSeccomp:") != std::string::npos;
  if (found.seccomp) return Pass(name, "the Seccomp field in /proc/self/status");
  return Fail(name,
              "no /proc/sys/kernel/seccomp/actions_avail and no Seccomp field in /proc/self/status",
              "a kernel built with CONFIG_SECCOMP_FILTER");
}

Check LandlockFromLsm(const std::optional<std::string>& lsm) {
  const char* name = "Landlock";
  if (!lsm) return Warn(name, "no /sys/kernel/security/lsm to tell whether it is enabled");
  std::string list = Trim(*lsm);
  bool enabled = list.find("landlock") != std::string::npos;
  std::string detail = fmt::format("{} the active LSMs ({}); the ABI version is read only live",
                                   enabled ? "among" : "not among", list);
  if (enabled) return Pass(name, detail);
  return Warn(name, detail, "add landlock to the lsm= boot parameter");
}

// The ABI version from landlock_create_ruleset(NULL, 0, VERSION), the kernel's own answer.
Check LandlockLive(const std::optional<std::string>& lsm) {
  const char* name = "Landlock";
  long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi > 0) return Pass(name, fmt::format("ABI version {}", abi));
  if (errno == EOPNOTSUPP) {
    return Warn(name, "built in, but not enabled at boot",
                "add landlock to the lsm= boot parameter");
  }
  if (errno == ENOSYS && lsm) return LandlockFromLsm(lsm);
  return Warn(
      name, fmt::format("landlock_create_ruleset: {}", std::strerror(errno)),
      "Landlock needs Linux 5.13 or later; the ns backend runs without it, with one layer less");
}

// Without root the vm backend's storage is a tmpfs that QEMU serves with mapped-xattr, which
// keeps each file's owner and mode in user.* xattrs: tmpfs holds those from Linux 6.6 on.
Check TmpfsUserXattrCheck(HostView& view, Findings& found) {
  const char* name = "user xattrs on tmpfs";
  auto release = view.Read("/proc/sys/kernel/osrelease");
  int major = 0, minor = 0;
  if (!release || sscanf(release->c_str(), "%d.%d", &major, &minor) != 2) {
    return Warn(name, "unknown: no /proc/sys/kernel/osrelease to read the kernel's version from");
  }
  found.tmpfs_user_xattr = major > 6 || (major == 6 && minor >= 6);
  std::string detail = fmt::format("Linux {}", Trim(*release));
  if (*found.tmpfs_user_xattr) return Pass(name, detail + ": 6.6 or later");
  return Warn(name, detail + ": before 6.6, tmpfs holds no user xattrs",
              "the vm backend without root needs Linux 6.6 or later; as root it runs here");
}

}  // namespace

Section ProbeKernel(HostView& view, Findings& found) {
  Section section{"Kernel", {}};
  section.checks.push_back(SeccompCheck(view, found));
  // Read live too, so that the capture script copies it for the fixture's answer.
  auto lsm = view.Read("/sys/kernel/security/lsm");
  section.checks.push_back(view.live() ? LandlockLive(lsm) : LandlockFromLsm(lsm));
  section.checks.push_back(TmpfsUserXattrCheck(view, found));
  return section;
}

}  // namespace smolbox::host
