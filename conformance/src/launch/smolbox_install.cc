#include "launch/smolbox_install.h"

#include <cstdlib>
#include <filesystem>

namespace smolvm_check {

std::string ThisExecutable() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "" : self.string();
}

std::string SmolboxBinary() {
  if (const char* env = std::getenv("SMOLBOX"); env != nullptr && *env != '\0') return env;
  std::string self = ThisExecutable();
  if (self.empty()) return "smolbox";
  return (std::filesystem::path(self).parent_path() / "smolbox").string();
}

}  // namespace smolvm_check
