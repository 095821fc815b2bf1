// Compiled into mutant builds only (mutant.h).
#ifdef SMOLBOX_MUTANTS

#include "mutant.h"

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace smolbox::mutant {
namespace {

std::vector<std::string>& Disabled() {
  static std::vector<std::string> names;
  return names;
}

bool Known(const std::string& name) {
  for (const Protection& p : Protections()) {
    if (name == p.name) return true;
  }
  return false;
}

}  // namespace

const std::vector<Protection>& Protections() {
  static const std::vector<Protection> all = {
      {"userns", "ns: the sandbox's user namespace (CLONE_NEWUSER)"},
      {"pidns", "ns: its pid namespace (CLONE_NEWPID)"},
      {"netns", "ns: its network namespace (CLONE_NEWNET)"},
      {"ipcns", "ns: its IPC namespace (CLONE_NEWIPC)"},
      {"utsns", "ns: its UTS namespace (CLONE_NEWUTS), and so its own hostname"},
      {"cgroupns", "ns: its cgroup namespace"},
      {"pivot_root", "ns: pivot_root with the host's root detached; chroot instead"},
      {"minimal_dev", "both: the sandbox's own /dev of five devices; the host's /dev instead"},
      {"proc_masks", "both: /proc's masked and read-only paths"},
      {"hidepid", "both: /proc mounted hidepid=invisible: no process of another uid is listed"},
      {"ro_root", "both: the read-only root skeleton"},
      {"ro_volume", "both: the read-only flag of ro volumes"},
      {"seccomp", "agent: the seccomp policy"},
      {"no_new_privs", "agent: PR_SET_NO_NEW_PRIVS"},
      {"cap_drop", "agent: the empty bounding, ambient and effective capability sets"},
      {"uid_switch", "agent: setresuid/setresgid to the workload's user"},
      {"close_fds", "agent: closing every descriptor but stdio before exec"},
      {"env_scrub", "runtime: the workload's environment is the spec's only"},
      {"rlimit_files", "agent: RLIMIT_NOFILE"},
      {"rlimit_cpu", "agent: RLIMIT_CPU, the CPU-time limit of each process"},
      {"cpu_time_total", "both: the CPU-time limit of the whole tree, from its cgroup's usage"},
      {"output_cap", "agent: the cap on each output stream"},
      {"memory_cgroup", "both: the memory cgroup's limit (the host's, and the guest's in a VM)"},
      {"pids_cgroup", "both: the pids cgroup's limit (the host's, and the guest's in a VM)"},
      {"cpu_quota", "both: the CPU cgroup's quota (the host's, and the guest's in a VM)"},
      {"storage_quota", "runtime: the storage's size"},
      {"copyback_sanitizer", "runtime: copy-back of regular files only, without setuid bits"},
      {"agent_timeout", "agent: the exec's timeout, the workload killed at its end"},
      {"host_backstop", "runtime: the host's kill of the sandbox at timeout plus grace"},
      {"egress_floor", "gateway: no connection to the floor (loopback, link-local, the host)"},
      {"private_ranges", "gateway: private ranges only through --allow-cidr"},
      {"egress_allowlist", "gateway: connections by name only to what --allow-host names"},
      {"first_bytes_check", "gateway: the TLS server name or HTTP Host must be allowed"},
      {"connection_cap", "gateway: the cap on open connections per sandbox"},
      {"deny_cidr", "gateway: --deny-cidr checked before every allow rule"},
      {"net_limit", "gateway: --net-limit, the bytes a sandbox may send in all"},
      {"dns_filter", "gateway: DNS answers only A, AAAA and CNAME for allowed names"},
      {"dns_rebinding", "gateway: an allowed name answered with a floor address is refused"},
      {"guest_userns", "vm agent: the workload's user namespace inside the guest"},
      {"qemu_sandbox", "vm: QEMU's -sandbox seccomp filter"},
      {"qemu_jail", "vm: QEMU's jail (its namespaces, unprivileged uid, no capabilities)"},
      {"no_nic", "vm: the VM has no network device"},
      {"image_path_checks", "image import: absolute and \"..\" entries refused by name"},
      {"image_beneath", "image import: paths resolved beneath the image's root, through no symlink"},
      {"image_hardlink_check", "image import: a hardlink only to a regular file of the image"},
      {"image_setid_strip", "image import: setuid and setgid bits stripped"},
      {"image_special_files", "image import: device nodes, FIFOs and sockets dropped"},
      {"image_limits", "image import: the size and file-count limits"},
      {"volume_root", "volumes of a --volume-root run: opened beneath the root, through no symlink"},
  };
  return all;
}

Expected<void> SetDisabled(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    if (!Known(name)) return std::unexpected(Error::Field("SMOLBOX_DISABLE", fmt::format("{:?} is no protection of this build (see smolbox --version)", name)));
  }
  Disabled() = names;
  return {};
}

Expected<void> LoadFromEnvironment() {
  const char* set = getenv("SMOLBOX_DISABLE");
  std::vector<std::string> names;
  for (const char* p = set ? set : ""; *p != '\0';) {
    const char* comma = strchr(p, ',');
    size_t length = comma ? static_cast<size_t>(comma - p) : strlen(p);
    if (length > 0) names.emplace_back(p, length);
    p += length + (comma ? 1 : 0);
  }
  return SetDisabled(names);
}

const std::vector<std::string>& DisabledNames() { return Disabled(); }

void AddDisabledTo(nlohmann::json& header) {
  if (!Disabled().empty()) header["disable"] = Disabled();
}

Expected<void> TakeDisabledFrom(nlohmann::json& header) {
  std::vector<std::string> names;
  if (header.contains("disable") && header["disable"].is_array()) {
    for (const auto& name : header["disable"]) {
      if (name.is_string()) names.push_back(name.get<std::string>());
    }
  }
  header.erase("disable");
  return SetDisabled(names);
}

bool IsDisabled(const char* name) noexcept {
  for (const std::string& disabled : Disabled()) {
    if (disabled == name) return true;
  }
  return false;
}

std::string Describe() {
  std::string names;
  for (const Protection& p : Protections()) names += fmt::format("\n  {:<14} {}", p.name, p.what);
  return "mutant build: not for use. SMOLBOX_DISABLE=NAME[,NAME] skips these protections:" + names;
}

}  // namespace smolbox::mutant

#endif  // SMOLBOX_MUTANTS
