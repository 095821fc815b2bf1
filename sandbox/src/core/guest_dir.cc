#include "guest_dir.h"

#include <unistd.h>

#include <cstdlib>
#include <string_view>

namespace smolbox {
namespace {

std::string_view Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

constexpr const char* kHostGuestDir = "/var/cache/smolbox/guest";

}  // namespace

std::string GuestDir() {
  if (!Env("SMOLBOX_GUEST_DIR").empty()) return std::string(Env("SMOLBOX_GUEST_DIR"));
  if (geteuid() == 0) return kHostGuestDir;
  if (Env("XDG_CACHE_HOME").starts_with('/')) return std::string(Env("XDG_CACHE_HOME")) + "/smolbox/guest";
  if (!Env("HOME").empty()) return std::string(Env("HOME")) + "/.cache/smolbox/guest";
  return "";
}

std::string GuestDirToRun() {
  std::string own = GuestDir();
  if (!Env("SMOLBOX_GUEST_DIR").empty() || own == kHostGuestDir) return own;
  if (!own.empty() && access((own + "/manifest.json").c_str(), F_OK) == 0) return own;
  if (access((std::string(kHostGuestDir) + "/manifest.json").c_str(), R_OK) == 0) return kHostGuestDir;
  return own;
}

}  // namespace smolbox
