#include "beneath.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>

#include <memory>

#include "mutant.h"

namespace smolbox::image {
namespace {

constexpr uint64_t kResolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;

// With the guard off (mutant.h) a path resolves as plain openat resolves it: through symlinks
// and "..".
uint64_t Resolve() { return SMOLBOX_PROTECTED("image_beneath") ? kResolve : 0; }

Error Refused(std::string_view what, std::string_view path, std::string_view why) {
  return Error{std::string(what), fmt::format("entry {:?} {}; refusing the image", path, why), 0};
}

}  // namespace

Expected<std::vector<std::string>> SplitEntryPath(std::string_view path, std::string_view what) {
  if (path.size() > kMaxEntryPath) return std::unexpected(Refused(what, path.substr(0, 64), "is longer than 4096 bytes"));
  if (path.find('\0') != std::string_view::npos) return std::unexpected(Refused(what, path, "holds a NUL byte"));
  // With these checks off (mutant.h) an absolute entry is taken as relative, and ".." is kept
  // for the resolution to meet.
  const bool checked = SMOLBOX_PROTECTED("image_path_checks");
  if (checked && path.starts_with('/')) return std::unexpected(Refused(what, path, "is an absolute path"));
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(start, end - start);
    if (checked && part == "..") return std::unexpected(Refused(what, path, "climbs out with \"..\""));
    if (!part.empty() && part != ".") {
      if (part.size() > 255) return std::unexpected(Refused(what, path, "has a name longer than 255 bytes"));
      parts.emplace_back(part);
    }
    start = end + 1;
  }
  return parts;
}

std::string JoinPath(const std::vector<std::string>& parts, size_t count) {
  std::string out;
  for (size_t i = 0; i < count && i < parts.size(); ++i) out += (i ? "/" : "") + parts[i];
  return out;
}

int OpenBeneath(int dir, const std::string& path, int flags, mode_t mode) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.mode = (flags & O_CREAT) ? mode : 0;
  how.resolve = Resolve();
  return static_cast<int>(syscall(SYS_openat2, dir, path.c_str(), &how, sizeof how));
}

Expected<UniqueFd> OpenDirBeneath(int root, const std::vector<std::string>& parts, size_t count,
                                  bool create, std::string_view what) {
  UniqueFd current(OpenBeneath(root, ".", O_RDONLY | O_DIRECTORY));
  if (!current.valid()) return std::unexpected(Error::Sys(fmt::format("{}: open the image root", what)));
  for (size_t i = 0; i < count; ++i) {
    if (create && mkdirat(current.get(), parts[i].c_str(), 0755) != 0 && errno != EEXIST) {
      return std::unexpected(Error::Sys(fmt::format("{}: mkdir {}", what, JoinPath(parts, i + 1))));
    }
    UniqueFd next(OpenBeneath(current.get(), parts[i], O_RDONLY | O_DIRECTORY));
    if (!next.valid()) {
      std::string on_the_way = JoinPath(parts, i + 1);
      if (errno == ELOOP || errno == EXDEV) {
        return std::unexpected(Refused(what, JoinPath(parts, parts.size()),
                                       fmt::format("goes through the symlink {}", on_the_way)));
      }
      if (errno == ENOTDIR) {
        return std::unexpected(Refused(what, JoinPath(parts, parts.size()),
                                       fmt::format("goes through {}, which is not a directory", on_the_way)));
      }
      return std::unexpected(Error::Sys(fmt::format("{}: open {}", what, on_the_way)));
    }
    current = std::move(next);
  }
  return current;
}

Expected<std::vector<std::string>> ListNames(int dir) {
  int fd = OpenBeneath(dir, ".", O_RDONLY | O_DIRECTORY);
  DIR* stream = fd >= 0 ? fdopendir(fd) : nullptr;
  if (stream == nullptr) {
    if (fd >= 0) close(fd);
    return std::unexpected(Error::Sys("opendir"));
  }
  std::unique_ptr<DIR, int (*)(DIR*)> closer(stream, closedir);
  std::vector<std::string> names;
  while (dirent* entry = readdir(stream)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  return names;
}

Expected<void> RemoveTree(int dir, const std::string& name) {
  struct stat st {};
  if (fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return {};
    return std::unexpected(Error::Sys("stat " + name));
  }
  if (S_ISDIR(st.st_mode)) {
    UniqueFd child(OpenBeneath(dir, name, O_RDONLY | O_DIRECTORY));
    if (!child.valid()) return std::unexpected(Error::Sys("open " + name));
    // The owner may have been denied its own directory by the image's mode.
    fchmod(child.get(), 0700);
    SMOLBOX_TRY(RemoveChildren(child.get(), [](const std::string&) { return false; }));
    if (unlinkat(dir, name.c_str(), AT_REMOVEDIR) != 0) return std::unexpected(Error::Sys("rmdir " + name));
    return {};
  }
  if (unlinkat(dir, name.c_str(), 0) != 0 && errno != ENOENT) return std::unexpected(Error::Sys("unlink " + name));
  return {};
}

}  // namespace smolbox::image
