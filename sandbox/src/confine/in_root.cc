#include "in_root.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <vector>

#include <fmt/format.h>

namespace smolbox::confine {
namespace {

int ResolveInRoot(int root_fd, const std::string& path, int flags) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_PATH | O_CLOEXEC);
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(syscall(SYS_openat2, root_fd, path.c_str(), &how, sizeof how));
}

// Made in the directory dir, never through a link: mkdirat and O_EXCL do not follow one.
int MakeEntry(int dir, const std::string& name, bool as_file) {
  if (!as_file) return mkdirat(dir, name.c_str(), 0755);
  int fd = openat(dir, name.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  close(fd);
  return 0;
}

}  // namespace

Expected<UniqueFd> OpenInRoot(int root_fd, const std::string& path, MakeMissing make) {
  std::vector<std::string> parts;
  for (size_t start = 0; start <= path.size();) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(start, end - start);
    if (part == "..") return std::unexpected(Error{path, "a path in the sandbox's root may not hold \"..\"", 0});
    if (!part.empty() && part != ".") parts.push_back(std::move(part));
    start = end + 1;
  }
  UniqueFd at(ResolveInRoot(root_fd, "/", O_DIRECTORY));
  if (!at.valid()) return std::unexpected(Error::Sys("open the sandbox's root"));
  std::string so_far;
  for (size_t i = 0; i < parts.size(); ++i) {
    so_far += "/" + parts[i];
    bool last = i + 1 == parts.size();
    bool as_file = make == MakeMissing::kFile && last;
    // The last component may be a file: the mount over it says if it does not fit.
    int flags = last ? 0 : O_DIRECTORY;
    // Each prefix is resolved afresh from the root, so a symlink anywhere on the way is followed
    // as the sandbox would follow it, and only inside the root.
    UniqueFd next(ResolveInRoot(root_fd, so_far, flags));
    if (!next.valid() && errno == ENOENT && make != MakeMissing::kNothing) {
      if (MakeEntry(at.get(), parts[i], as_file) != 0 && errno != EEXIST) {
        if (errno == EACCES || errno == EROFS) {
          // An image's directories belong to ids the sandbox does not map, read-only to it.
          return std::unexpected(Error{so_far, "cannot be made: its directory in the sandbox's root is not "
                                       "writable to the sandbox", errno});
        }
        return std::unexpected(Error::Sys(fmt::format("create {} in the sandbox's root", so_far)));
      }
      next.Reset(ResolveInRoot(root_fd, so_far, flags));
    }
    if (!next.valid()) {
      // ENOENT after the entry was made: a symlink that leads nowhere in this root.
      return std::unexpected(Error::Sys(fmt::format("open {} in the sandbox's root", so_far)));
    }
    at = std::move(next);
  }
  return at;
}

}  // namespace smolbox::confine
