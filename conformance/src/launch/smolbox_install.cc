#include "launch/smolbox_install.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace smolvm_check {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

}  // namespace

std::string SmolboxBinary() {
  if (const char* env = std::getenv("SMOLBOX"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "smolbox";
  return (self.parent_path() / "smolbox").string();
}

// Where scripts/build-guest puts the vm backend's kernel, initramfs and rootfs, and where
// smolbox looks: $SMOLBOX_GUEST_DIR; for root /var/cache/smolbox/guest; else
// $XDG_CACHE_HOME/smolbox/guest or ~/.cache/smolbox/guest.
std::string GuestDir() {
  if (!Env("SMOLBOX_GUEST_DIR").empty()) return Env("SMOLBOX_GUEST_DIR");
  if (geteuid() == 0) return "/var/cache/smolbox/guest";
  if (!Env("XDG_CACHE_HOME").empty()) return Env("XDG_CACHE_HOME") + "/smolbox/guest";
  if (!Env("HOME").empty()) return Env("HOME") + "/.cache/smolbox/guest";
  return "";
}

}  // namespace smolvm_check
