// Namespaces: the sysctls that gate user namespaces, the namespace types this kernel has, and,
// live, whether an unprivileged user really gets a user namespace with capabilities in it.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <grp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "probe.h"

namespace smolbox::host {
namespace {

constexpr uid_t kNobody = 65534;

std::optional<long> ReadLong(HostView& view, const std::string& path) {
  auto text = view.Read(path);
  if (!text) return std::nullopt;
  try {
    return std::stol(*text);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

Check MaxUserNamespaces(HostView& view, Findings& found) {
  const char* name = "user namespaces";
  auto max = ReadLong(view, "/proc/sys/user/max_user_namespaces");
  if (!max) return Warn(name, "cannot read /proc/sys/user/max_user_namespaces");
  found.userns_enabled = *max > 0;
  if (found.userns_enabled) return Pass(name, fmt::format("max_user_namespaces={}", *max));
  return Fail(name, "max_user_namespaces=0: no one may create a user namespace",
              "sysctl -w user.max_user_namespaces=15000");
}

// Debian's switch; upstream kernels have no such file and allow unprivileged user namespaces.
Check DebianSwitch(HostView& view, bool& allows) {
  const char* name = "unprivileged_userns_clone (Debian)";
  auto value = ReadLong(view, "/proc/sys/kernel/unprivileged_userns_clone");
  allows = !value || *value != 0;
  if (!value) return Pass(name, "not in this kernel, which does not gate them");
  if (allows) return Pass(name, fmt::format("unprivileged_userns_clone={}", *value));
  return Warn(name, "unprivileged_userns_clone=0: only root may create user namespaces",
              "sysctl -w kernel.unprivileged_userns_clone=1");
}

// Ubuntu 24.04's AppArmor restriction: the namespace is created, but without capabilities.
Check AppArmorRestriction(HostView& view, Findings& found) {
  const char* name = "AppArmor userns restriction (Ubuntu)";
  auto value = ReadLong(view, "/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
  found.apparmor_restricts_userns = value && *value != 0;
  if (!value) return Pass(name, "not in this kernel");
  if (!found.apparmor_restricts_userns) {
    return Pass(name, "apparmor_restrict_unprivileged_userns=0");
  }
  return Warn(name,
              "apparmor_restrict_unprivileged_userns=1: an unprivileged user namespace gets no "
              "capabilities unless an AppArmor profile allows it",
              "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile "
              "with a `userns,` rule for smolbox");
}

Check NamespaceTypes(HostView& view, Findings& found) {
  std::vector<std::string> present, missing_required, missing_optional;
  for (const char* ns : {"pid", "net", "mnt", "ipc", "uts", "cgroup", "time", "user"}) {
    bool optional = std::strcmp(ns, "cgroup") == 0 || std::strcmp(ns, "time") == 0;
    if (view.Exists(fmt::format("/proc/self/ns/{}", ns)))
      present.push_back(ns);
    else
      (optional ? missing_optional : missing_required).push_back(ns);
  }
  found.ns_types_ok = missing_required.empty();
  const char* name = "namespace types";
  if (!missing_required.empty()) {
    return Fail(name, fmt::format("missing {}", fmt::join(missing_required, " ")),
                "the ns backend needs pid, net, mnt, ipc, uts and user namespaces");
  }
  if (!missing_optional.empty()) {
    return Warn(name, fmt::format("{}; missing {}", fmt::join(present, " "),
                                  fmt::join(missing_optional, " ")));
  }
  return Pass(name, fmt::format("{}", fmt::join(present, " ")));
}

struct ChildReport {
  int step = 0;  // 0: every step worked
  int err = 0;
};

constexpr const char* kSteps[] = {"", "drop to the test uid", "unshare(CLONE_NEWUSER)",
                                  "write uid_map", "unshare(CLONE_NEWNS) inside it"};

// After fork: no allocation, just syscalls; the failing step and errno go up the pipe.
[[noreturn]] void UserNamespaceChild(int report_fd, uid_t as_uid, const std::string& map) {
  auto fail = [report_fd](int step) {
    ChildReport r{step, errno};
    (void)!write(report_fd, &r, sizeof r);
    _exit(1);
  };
  if (geteuid() != as_uid) {
    if (setgroups(0, nullptr) != 0 || setgid(as_uid) != 0 || setuid(as_uid) != 0) fail(1);
    // A uid change makes /proc/self root-owned and unwritable; uid_map must stay writable.
    prctl(PR_SET_DUMPABLE, 1);
  }
  if (unshare(CLONE_NEWUSER) != 0) fail(2);
  int fd = open("/proc/self/setgroups", O_WRONLY | O_CLOEXEC);
  if (fd >= 0) (void)!write(fd, "deny", 4), close(fd);
  fd = open("/proc/self/uid_map", O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, map.data(), map.size()) < 0) fail(3);
  // Creating a mount namespace needs CAP_SYS_ADMIN in the new user namespace: it is what
  // Ubuntu's AppArmor restriction takes away while still letting unshare(CLONE_NEWUSER) pass.
  if (unshare(CLONE_NEWNS) != 0) fail(4);
  _exit(0);
}

// Empty when as_uid created a user namespace with capabilities in it; otherwise why not.
std::string TryUserNamespace(uid_t as_uid) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return fmt::format("pipe2: {}", std::strerror(errno));
  std::string map = fmt::format("0 {} 1", as_uid);
  pid_t pid = fork();
  if (pid < 0) return fmt::format("fork: {}", std::strerror(errno));
  if (pid == 0) UserNamespaceChild(fds[1], as_uid, map);
  close(fds[1]);
  ChildReport r;
  ssize_t n = read(fds[0], &r, sizeof r);
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (n == sizeof r && r.step > 0)
    return fmt::format("{}: {}", kSteps[r.step], std::strerror(r.err));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "the test child died";
  return "";
}

// Live: a real attempt, as this user or, for root, as nobody. A fixture: what the sysctls allow.
Check RootlessCheck(HostView& view, Findings& found, bool debian_allows) {
  const char* name = "unprivileged user namespace";
  bool sysctls_allow = found.userns_enabled && debian_allows && !found.apparmor_restricts_userns;
  if (!view.live()) {
    found.rootless_userns = sysctls_allow;
    return Warn(name, fmt::format("{}; the sysctls {} it", kSkippedUnderRoot,
                                  sysctls_allow ? "allow" : "forbid"));
  }
  uid_t as_uid = view.uid() == 0 ? kNobody : view.uid();
  std::string failure = TryUserNamespace(as_uid);
  found.rootless_userns = failure.empty();
  if (failure.empty()) {
    return Pass(name, fmt::format("uid {} created one, and a mount namespace inside it", as_uid));
  }
  std::string hint = found.apparmor_restricts_userns ? "see the AppArmor restriction above" : "";
  return Fail(name, fmt::format("uid {}: {}", as_uid, failure), hint);
}

}  // namespace

Section ProbeNamespaces(HostView& view, Findings& found) {
  Section section{"Namespaces", {}};
  bool debian_allows = true;
  section.checks.push_back(MaxUserNamespaces(view, found));
  section.checks.push_back(DebianSwitch(view, debian_allows));
  section.checks.push_back(AppArmorRestriction(view, found));
  section.checks.push_back(NamespaceTypes(view, found));
  section.checks.push_back(RootlessCheck(view, found, debian_allows));
  return section;
}

}  // namespace smolbox::host
