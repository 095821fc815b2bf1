#include "launch/host_files.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "unique_fd.h"

namespace smolvm_check {
namespace {

using smolbox::UniqueFd;

std::string ReadFd(int fd, size_t max_bytes) {
  std::string text;
  char buf[8192];
  while (text.size() < max_bytes) {
    ssize_t n = read(fd, buf, std::min(sizeof buf, max_bytes - text.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

}  // namespace

std::string ReadUpTo(const std::string& path, size_t max_bytes) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  return fd.valid() ? ReadFd(fd.get(), max_bytes) : std::string();
}

std::optional<std::string> ReadRegularFileBeneath(const std::string& dir, const std::string& relative,
                                                  size_t max_bytes) {
  UniqueFd dir_fd(open(dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir_fd.valid()) return std::nullopt;
  // O_NONBLOCK: a FIFO swapped in after the walk must not hang the verifier.
  open_how how{};
  how.flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  UniqueFd fd(static_cast<int>(syscall(SYS_openat2, dir_fd.get(), relative.c_str(), &how, sizeof how)));
  struct stat st{};
  if (!fd.valid() || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return ReadFd(fd.get(), max_bytes);
}

}  // namespace smolvm_check
