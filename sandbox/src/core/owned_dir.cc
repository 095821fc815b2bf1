#include "owned_dir.h"

#include <sys/stat.h>
#include <unistd.h>

namespace smolbox {

Expected<void> EnsureOwnedDir(const std::string& path, mode_t mode) {
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) return std::unexpected(Error::Sys("mkdir " + path));
  struct stat st{};
  if (lstat(path.c_str(), &st) != 0) return std::unexpected(Error::Sys("lstat " + path));
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
    return std::unexpected(Error{path, "is not a directory owned by this user; refusing it", 0});
  }
  if ((st.st_mode & 07777) != mode && chmod(path.c_str(), mode) != 0) return std::unexpected(Error::Sys("chmod " + path));
  return {};
}

}  // namespace smolbox
