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

}  // namespace

std::string GuestDir() {
  if (!Env("SMOLBOX_GUEST_DIR").empty()) return std::string(Env("SMOLBOX_GUEST_DIR"));
  if (geteuid() == 0) return "/var/cache/smolbox/guest";
  if (Env("XDG_CACHE_HOME").starts_with('/')) return std::string(Env("XDG_CACHE_HOME")) + "/smolbox/guest";
  if (!Env("HOME").empty()) return std::string(Env("HOME")) + "/.cache/smolbox/guest";
  return "";
}

}  // namespace smolbox
