#include "cache_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "unique_fd.h"

namespace smolbox::vm {

std::string FileIdentity(int fd) {
  struct stat st{};
  if (fstat(fd, &st) != 0) return "unknown";
  return fmt::format("dev={} ino={} size={} mtime={}.{:09}", st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec,
                     st.st_mtim.tv_nsec);
}

std::string ReadSmallFile(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return {};
  std::string text;
  char chunk[4096];
  for (ssize_t n; (n = read(fd.get(), chunk, sizeof chunk)) > 0 && text.size() < (1 << 20);) text.append(chunk, n);
  return text;
}

bool ReplaceFile(const std::string& path, const std::string& text) {
  std::string temp = fmt::format("{}.{}.new", path, getpid());
  unlink(temp.c_str());  // left by a killed process that had our pid
  UniqueFd fd(open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return false;
  bool written = write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (!written || rename(temp.c_str(), path.c_str()) != 0) {
    unlink(temp.c_str());
    return false;
  }
  return true;
}

}  // namespace smolbox::vm
