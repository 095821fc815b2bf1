#include "launch/smolbox_install.h"

#include <cstdlib>
#include <filesystem>

namespace smolvm_check {

std::string SmolboxBinary() {
  if (const char* env = std::getenv("SMOLBOX"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "smolbox";
  return (self.parent_path() / "smolbox").string();
}

}  // namespace smolvm_check
