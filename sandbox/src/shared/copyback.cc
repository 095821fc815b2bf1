#include "copyback.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>

#include <fmt/format.h>

#include "mutant.h"
#include "unique_fd.h"

namespace smolbox::shared {
namespace {

// Deeper than any real project tree; the walk holds two descriptors per level.
constexpr size_t kMaxDepth = 256;
constexpr mode_t kPermissionBits = 0777;  // never setuid, setgid or sticky

std::string Join(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : dir + "/" + name;
}

// Entries of a directory, by name, as lstat sees them.
Expected<std::map<std::string, struct stat>> List(int dir_fd) {
  int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* dir = fd >= 0 ? fdopendir(fd) : nullptr;
  if (!dir) {
    if (fd >= 0) close(fd);
    return std::unexpected(Error::Sys("opendir"));
  }
  std::unique_ptr<DIR, int (*)(DIR*)> closer(dir, closedir);
  std::map<std::string, struct stat> entries;
  while (dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    struct stat st{};
    if (fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) entries.emplace(name, st);
  }
  return entries;
}

// An entry as the guest made it, from user.virtfs.mode (see Metadata). The host's type stays
// the authority: a type the xattr names that the host does not have, as a regular file or a
// directory, makes the entry a "special file", which never crosses.
void MapMetadata(int dir_fd, std::map<std::string, struct stat>& entries) {
  for (auto& [name, st] : entries) {
    uint32_t mode = 0;
    // By /proc/self/fd, and with lgetxattr: the entry itself, never what a link names.
    std::string path = fmt::format("/proc/self/fd/{}/{}", dir_fd, name);
    if (lgetxattr(path.c_str(), "user.virtfs.mode", &mode, sizeof mode) != sizeof mode) continue;
    mode_t type = mode & S_IFMT;
    bool mismatch = (type == S_IFREG || type == S_IFDIR) && type != (st.st_mode & S_IFMT);
    st.st_mode = mismatch ? 0 : mode;
  }
}

Expected<UniqueFd> OpenDir(int parent, const std::string& name) {
  UniqueFd fd(openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return std::unexpected(Error::Sys("open directory " + name));
  return fd;
}

std::string KindOf(mode_t mode) {
  if (S_ISLNK(mode)) return "symlink";
  if (S_ISFIFO(mode)) return "FIFO";
  if (S_ISSOCK(mode)) return "socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "device";
  return "special file";
}

// The copy-back sanitizer's mutant (mutant.h): a symlink of the sandbox's made as it is on the
// host, and the setuid and setgid bits of every file kept. Under mapped-xattr (a VM's storage)
// the guest's symlink is a regular file on the host that holds its target.
Expected<void> CopyLinkAsIs(int from_dir, const std::string& name, const struct stat& st, int to_dir) {
  if (!S_ISLNK(st.st_mode)) return {};
  char target[4096];
  ssize_t n = readlinkat(from_dir, name.c_str(), target, sizeof target - 1);
  if (n < 0 && errno == EINVAL) {
    UniqueFd file(openat(from_dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    n = file.valid() ? read(file.get(), target, sizeof target - 1) : -1;
  }
  if (n < 0) return std::unexpected(Error::Sys("readlink " + name));
  unlinkat(to_dir, name.c_str(), 0);
  if (symlinkat(std::string(target, static_cast<size_t>(n)).c_str(), to_dir, name.c_str()) != 0) {
    return std::unexpected(Error::Sys("symlink " + name));
  }
  return {};
}

mode_t PermissionBits() { return SMOLBOX_PROTECTED("copyback_sanitizer") ? kPermissionBits : 07777; }

// A name for a file of ours in the user's directory for an instant; hidden, and unlikely to clash.
std::string TempName(const std::string& name) {
  return fmt::format(".smolbox-{}-{}", std::random_device{}(), name).substr(0, 250);
}

// An unnamed file in dir (O_TMPFILE), or, where its filesystem has none, one under a temporary
// name; temp is that name, or empty.
Expected<UniqueFd> CreateUnlinked(int dir, const std::string& name, std::string& temp) {
  UniqueFd fd(openat(dir, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600));
  if (fd.valid()) return fd;
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) return std::unexpected(Error::Sys("create " + name));
  temp = TempName(name);
  fd.Reset(openat(dir, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return std::unexpected(Error::Sys("create " + temp));
  return fd;
}

// Gives the whole file `fd` the name `name` in dir, replacing whatever entry is there (even a
// symlink) without following it.
Expected<void> Install(int fd, int dir, const std::string& name, std::string& temp) {
  if (temp.empty()) {
    std::string self = fmt::format("/proc/self/fd/{}", fd);
    if (linkat(AT_FDCWD, self.c_str(), dir, name.c_str(), AT_SYMLINK_FOLLOW) == 0) return {};
    if (errno != EEXIST) return std::unexpected(Error::Sys("install " + name));
    // Replacing an entry takes a rename, and a rename a name: a whole file gets one for an instant.
    temp = TempName(name);
    if (linkat(AT_FDCWD, self.c_str(), dir, temp.c_str(), AT_SYMLINK_FOLLOW) != 0) {
      Error e = Error::Sys("install " + name);
      temp.clear();
      return std::unexpected(e);
    }
  }
  if (renameat(dir, temp.c_str(), dir, name.c_str()) != 0) return std::unexpected(Error::Sys("install " + name));
  temp.clear();
  return {};
}

// Writes `from` into `to_dir/name`. The copy is written into an unnamed file that gets its name
// only when whole, so that a runtime killed mid-copy leaves nothing half-written in the volume.
Expected<void> CopyFile(int from_dir, const std::string& name, const struct stat& st, int to_dir,
                        Owner owner) {
  UniqueFd in(openat(from_dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!in.valid()) return std::unexpected(Error::Sys("open " + name));
  std::string temp;
  SMOLBOX_ASSIGN_OR_RETURN(UniqueFd out, CreateUnlinked(to_dir, name, temp));
  auto fail = [&](Error e) -> Expected<void> {
    if (!temp.empty()) unlinkat(to_dir, temp.c_str(), 0);
    return std::unexpected(std::move(e));
  };
  off_t remaining = st.st_size;
  while (remaining > 0) {
    ssize_t n = sendfile(out.get(), in.get(), nullptr, static_cast<size_t>(std::min<off_t>(remaining, 1 << 30)));
    if (n <= 0) return fail(Error::Sys("copy " + name));
    remaining -= n;
  }
  timespec times[2] = {st.st_atim, st.st_mtim};
  if (fchown(out.get(), owner.uid, owner.gid) != 0 || fchmod(out.get(), st.st_mode & PermissionBits()) != 0 ||
      futimens(out.get(), times) != 0) {
    return fail(Error::Sys("install " + name));
  }
  if (auto installed = Install(out.get(), to_dir, name, temp); !installed) return fail(installed.error());
  return {};
}

// Ensures to_dir/name is a real directory (not a symlink) and opens it.
Expected<UniqueFd> EnsureDir(int to_dir, const std::string& name, mode_t mode, Owner owner) {
  if (mkdirat(to_dir, name.c_str(), 0700) == 0) {
    if (fchownat(to_dir, name.c_str(), owner.uid, owner.gid, AT_SYMLINK_NOFOLLOW) != 0 ||
        fchmodat(to_dir, name.c_str(), mode & kPermissionBits, 0) != 0) {
      return std::unexpected(Error::Sys("set owner and mode of " + name));
    }
  } else if (errno != EEXIST) {
    return std::unexpected(Error::Sys("mkdir " + name));
  }
  return OpenDir(to_dir, name);
}

bool SameContentLikely(const struct stat& a, const struct stat& b) {
  return a.st_size == b.st_size && a.st_mtim.tv_sec == b.st_mtim.tv_sec &&
         a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
}

Expected<void> RemoveTree(int dir_fd, const std::string& name, bool is_dir, size_t depth) {
  if (is_dir) {
    if (depth >= kMaxDepth) return std::unexpected(Error{name, fmt::format("nested deeper than {} levels to remove", kMaxDepth), 0});
    SMOLBOX_ASSIGN_OR_RETURN(auto sub, OpenDir(dir_fd, name));
    SMOLBOX_ASSIGN_OR_RETURN(auto entries, List(sub.get()));
    for (const auto& [child, st] : entries) {
      SMOLBOX_TRY(RemoveTree(sub.get(), child, S_ISDIR(st.st_mode), depth + 1));
    }
  }
  if (unlinkat(dir_fd, name.c_str(), is_dir ? AT_REMOVEDIR : 0) != 0) {
    return std::unexpected(Error::Sys("remove " + name));
  }
  return {};
}

struct Walk {
  Owner owner;
  bool from_sandbox;  // copy-back: drop hardlinks, mirror deletions, skip what fails
  int64_t* budget;    // bytes left to copy: a sparse file must not inflate on the host
  std::vector<std::string>* dropped;
  Metadata metadata = Metadata::kNative;  // of the sandbox's side
};

// What can cross at all; anything else on the host side never entered the sandbox, so its
// absence there is no deletion.
bool Crosses(const struct stat& st) { return S_ISDIR(st.st_mode) || S_ISREG(st.st_mode); }

// One directory being synced: both sides open, the source's entries listed, and how far the
// walk has got through them.
struct Level {
  UniqueFd from;
  UniqueFd to;
  std::string path;
  std::vector<std::pair<std::string, struct stat>> entries;
  std::map<std::string, struct stat> existing;
  size_t next = 0;
};

Expected<Level> OpenLevel(UniqueFd from, UniqueFd to, std::string path, const Walk& walk) {
  auto entries = List(from.get());
  if (!entries) return std::unexpected(Error{path, entries.error().ToString(), 0});
  if (walk.metadata == Metadata::kMappedXattr) MapMetadata(from.get(), *entries);
  auto existing = List(to.get());
  if (!existing) return std::unexpected(Error{path, existing.error().ToString(), 0});
  return Level{std::move(from), std::move(to), std::move(path), {entries->begin(), entries->end()}, std::move(*existing), 0};
}

// Copy-in fails whole: a sandbox must never start on part of its input, which its copy-back
// would then mirror as deletions. Copy-back loses only the entry that failed, and says so.
Expected<void> Skip(const Walk& walk, const std::string& rel, const Error& error) {
  if (!walk.from_sandbox) return std::unexpected(Error{rel, error.ToString(), error.errnum});
  walk.dropped->push_back(fmt::format("{} not copied: {}", rel, error.ToString()));
  return {};
}

// A regular file or anything else; directories are the walk's.
Expected<void> SyncEntry(Level& level, const std::string& name, const struct stat& st, const Walk& walk) {
  std::string rel = Join(level.path, name);
  auto existing = level.existing.find(name);
  if (!S_ISREG(st.st_mode) && walk.from_sandbox && !SMOLBOX_PROTECTED("copyback_sanitizer")) {
    return CopyLinkAsIs(level.from.get(), name, st, level.to.get());
  } else if (!S_ISREG(st.st_mode)) {
    walk.dropped->push_back(fmt::format("{} {} not copied", KindOf(st.st_mode), rel));
  } else if (walk.from_sandbox && st.st_nlink > 1) {
    walk.dropped->push_back(fmt::format("hardlink {} not copied", rel));
  } else if (existing != level.existing.end() && S_ISREG(existing->second.st_mode) &&
             SameContentLikely(st, existing->second)) {
    return {};
  } else if (st.st_size > *walk.budget) {
    if (!walk.from_sandbox) return std::unexpected(Error{rel, "does not fit in the storage quota", ENOSPC});
    walk.dropped->push_back(fmt::format("{} ({} bytes) exceeds what the storage quota allows; not copied", rel, st.st_size));
  } else {
    if (existing != level.existing.end() && S_ISDIR(existing->second.st_mode)) {
      if (auto ok = RemoveTree(level.to.get(), name, true, 0); !ok) return Skip(walk, rel, ok.error());
    }
    if (auto ok = CopyFile(level.from.get(), name, st, level.to.get(), walk.owner); !ok) return Skip(walk, rel, ok.error());
    *walk.budget -= st.st_size;
  }
  return {};
}

// The next level down, or nullopt when this directory is skipped.
Expected<std::optional<Level>> Descend(Level& level, const std::string& name, const struct stat& st,
                                       size_t depth, const Walk& walk) {
  std::string rel = Join(level.path, name);
  if (depth >= kMaxDepth) {
    SMOLBOX_TRY(Skip(walk, rel, Error{"directory", fmt::format("nested deeper than {} levels", kMaxDepth), 0}));
    return std::nullopt;
  }
  auto existing = level.existing.find(name);
  if (existing != level.existing.end() && !S_ISDIR(existing->second.st_mode)) {
    if (auto ok = RemoveTree(level.to.get(), name, false, 0); !ok) {
      SMOLBOX_TRY(Skip(walk, rel, ok.error()));
      return std::nullopt;
    }
  }
  auto from = OpenDir(level.from.get(), name);
  auto to = from ? EnsureDir(level.to.get(), name, st.st_mode, walk.owner) : std::unexpected(from.error());
  auto next = to ? OpenLevel(std::move(*from), std::move(*to), rel, walk) : std::unexpected(to.error());
  if (!next) {
    SMOLBOX_TRY(Skip(walk, rel, next.error()));
    return std::nullopt;
  }
  return std::optional<Level>(std::move(*next));
}

// What the sandbox deleted goes on the host too, once the directory is done.
void MirrorDeletions(const Level& level, const Walk& walk) {
  std::set<std::string> present;
  for (const auto& [name, unused] : level.entries) present.insert(name);
  for (const auto& [name, st] : level.existing) {
    if (present.contains(name) || !Crosses(st)) continue;
    if (auto ok = RemoveTree(level.to.get(), name, S_ISDIR(st.st_mode), 0); !ok) {
      walk.dropped->push_back(fmt::format("{} not removed: {}", Join(level.path, name), ok.error().ToString()));
    }
  }
}

// Depth first, on an explicit stack of open directories: no recursion, so a deep tree costs
// descriptors (bounded by kMaxDepth), not the stack.
Expected<void> Sync(int from_dir, int to_dir, const Walk& walk) {
  UniqueFd from(fcntl(from_dir, F_DUPFD_CLOEXEC, 0));
  UniqueFd to(fcntl(to_dir, F_DUPFD_CLOEXEC, 0));
  if (!from.valid() || !to.valid()) return std::unexpected(Error::Sys("dup a volume's directory"));
  SMOLBOX_ASSIGN_OR_RETURN(auto top, OpenLevel(std::move(from), std::move(to), "", walk));
  std::vector<Level> stack;
  stack.push_back(std::move(top));
  while (!stack.empty()) {
    Level& level = stack.back();
    if (level.next == level.entries.size()) {
      if (walk.from_sandbox) MirrorDeletions(level, walk);
      stack.pop_back();
      continue;
    }
    const auto& [name, st] = level.entries[level.next++];
    if (!S_ISDIR(st.st_mode)) {
      SMOLBOX_TRY(SyncEntry(level, name, st, walk));
      continue;
    }
    auto next = Descend(level, name, st, stack.size(), walk);
    SMOLBOX_TRY(next);
    if (*next) stack.push_back(std::move(**next));
  }
  return {};
}

}  // namespace

Expected<void> CopyIn(int from_dir, int to_dir, Owner owner, int64_t* budget,
                      std::vector<std::string>* dropped) {
  return Sync(from_dir, to_dir, Walk{owner, false, budget, dropped});
}

Expected<void> CopyBack(int sandbox_dir, int host_dir, Owner owner, int64_t budget,
                        std::vector<std::string>* dropped, Metadata metadata) {
  return Sync(sandbox_dir, host_dir, Walk{owner, true, &budget, dropped, metadata});
}

}  // namespace smolbox::shared
