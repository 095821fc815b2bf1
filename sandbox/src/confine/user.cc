#include "user.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "host_root.h"

namespace smolbox::confine {
namespace {

Expected<void> WriteProcFile(pid_t pid, const char* name, const std::string& text) {
  std::string path = fmt::format("/proc/{}/{}", pid, name);
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return std::unexpected(Error::Sys("open " + path));
  ssize_t n = write(fd, text.data(), text.size());
  int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    return std::unexpected(Error::Sys(fmt::format("write {} \"{}\"", path, text), err));
  }
  return {};
}

}  // namespace

Identity MappedIdentity(const WorkloadUser& user, uid_t base) {
  Identity id;
  id.uid = user.uid;
  id.gid = user.gid;
  id.uid_map = fmt::format("0 {} 65536\n", base);
  id.gid_map = id.uid_map;
  id.host_uid = base + id.uid;
  id.host_gid = base + id.gid;
  id.setup_becomes_root = true;
  return id;
}

Identity PlanIdentity(const WorkloadUser& user) {
  if (IsHostRoot()) return MappedIdentity(user, kHostIdBase);
  Identity id;
  id.uid = user.uid;
  id.gid = user.gid;
  id.rootless = true;
  id.host_uid = geteuid();
  id.host_gid = getegid();
  id.uid_map = fmt::format("{} {} 1\n", id.uid, id.host_uid);
  id.gid_map = fmt::format("{} {} 1\n", id.gid, id.host_gid);
  return id;
}

Expected<void> WriteIdMaps(pid_t child, const Identity& identity) {
  // Unprivileged writers must give up setgroups before they may write gid_map; otherwise the
  // sandbox could drop a supplementary group that some host file denies access to.
  if (identity.rootless) {
    SMOLBOX_TRY(WriteProcFile(child, "setgroups", "deny"));
  }
  SMOLBOX_TRY(WriteProcFile(child, "uid_map", identity.uid_map));
  return WriteProcFile(child, "gid_map", identity.gid_map);
}

Expected<void> BecomeSetupRoot(const Identity& identity) {
  if (!identity.setup_becomes_root) return {};
  if (setgroups(0, nullptr) != 0) return std::unexpected(Error::Sys("setgroups"));
  if (setresgid(0, 0, 0) != 0) return std::unexpected(Error::Sys("setresgid 0"));
  if (setresuid(0, 0, 0) != 0) return std::unexpected(Error::Sys("setresuid 0"));
  return {};
}

Expected<void> LimitAgentBoundingSet() {
  bool agent_is_root = getuid() == 0;
  for (int cap = 0; cap <= 63; ++cap) {
    bool keep = cap == CAP_SETUID || cap == CAP_SETGID || cap == CAP_SETPCAP || cap == CAP_KILL;
    if (agent_is_root && keep) continue;
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
      if (errno == EINVAL) break;  // past the kernel's last capability
      return std::unexpected(Error::Sys(fmt::format("prctl PR_CAPBSET_DROP {}", cap)));
    }
  }
  return {};
}

}  // namespace smolbox::confine
