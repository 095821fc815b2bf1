#include "copyback.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <random>

#include <fmt/format.h>

#include "unique_fd.h"

namespace smolbox::ns {
namespace {

constexpr int kMaxDepth = 64;
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

// Writes `from` into `to_dir/name` via a temporary name and rename: rename replaces whatever
// entry is there (even a symlink) without following it.
Expected<void> CopyFile(int from_dir, const std::string& name, const struct stat& st, int to_dir,
                        Owner owner) {
  UniqueFd in(openat(from_dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!in.valid()) return std::unexpected(Error::Sys("open " + name));
  std::string temp = fmt::format(".smolbox-{}-{}", std::random_device{}(), name).substr(0, 250);
  UniqueFd out(openat(to_dir, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out.valid()) return std::unexpected(Error::Sys("create " + temp));
  off_t remaining = st.st_size;
  while (remaining > 0) {
    ssize_t n = sendfile(out.get(), in.get(), nullptr, static_cast<size_t>(std::min<off_t>(remaining, 1 << 30)));
    if (n <= 0) {
      unlinkat(to_dir, temp.c_str(), 0);
      return std::unexpected(Error::Sys("copy " + name));
    }
    remaining -= n;
  }
  timespec times[2] = {st.st_atim, st.st_mtim};
  if (fchown(out.get(), owner.uid, owner.gid) != 0 || fchmod(out.get(), st.st_mode & kPermissionBits) != 0 ||
      futimens(out.get(), times) != 0 || renameat(to_dir, temp.c_str(), to_dir, name.c_str()) != 0) {
    Error e = Error::Sys("install " + name);
    unlinkat(to_dir, temp.c_str(), 0);
    return std::unexpected(e);
  }
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

Expected<void> RemoveTree(int dir_fd, const std::string& name, bool is_dir, int depth) {
  if (is_dir) {
    if (depth > kMaxDepth) return std::unexpected(Error{name, "too deep to remove", 0});
    auto sub = OpenDir(dir_fd, name);
    if (!sub) return std::unexpected(sub.error());
    auto entries = List(sub->get());
    if (!entries) return std::unexpected(entries.error());
    for (const auto& [child, st] : *entries) {
      if (auto ok = RemoveTree(sub->get(), child, S_ISDIR(st.st_mode), depth + 1); !ok) return ok;
    }
  }
  if (unlinkat(dir_fd, name.c_str(), is_dir ? AT_REMOVEDIR : 0) != 0) {
    return std::unexpected(Error::Sys("remove " + name));
  }
  return {};
}

struct Walk {
  Owner owner;
  bool from_sandbox;  // copy-back: drop hardlinks, mirror deletions
  int64_t* budget;    // bytes left to copy: a sparse file must not inflate on the host
  std::vector<std::string>* dropped;
};

// What can cross at all; anything else on the host side never entered the sandbox, so its
// absence there is no deletion.
bool Crosses(const struct stat& st) { return S_ISDIR(st.st_mode) || S_ISREG(st.st_mode); }

Expected<void> Sync(int from_dir, int to_dir, const std::string& path, const Walk& walk, int depth) {
  if (depth > kMaxDepth) return std::unexpected(Error{path, "directory tree too deep", 0});
  auto from = List(from_dir);
  if (!from) return std::unexpected(from.error());
  auto to = List(to_dir);
  if (!to) return std::unexpected(to.error());
  for (const auto& [name, st] : *from) {
    std::string rel = Join(path, name);
    auto existing = to->find(name);
    if (S_ISDIR(st.st_mode)) {
      if (existing != to->end() && !S_ISDIR(existing->second.st_mode)) {
        if (auto ok = RemoveTree(to_dir, name, false, depth); !ok) return ok;
      }
      auto sub_from = OpenDir(from_dir, name);
      if (!sub_from) return std::unexpected(Error{rel, sub_from.error().ToString(), 0});
      auto sub_to = EnsureDir(to_dir, name, st.st_mode, walk.owner);
      if (!sub_to) return std::unexpected(Error{rel, sub_to.error().ToString(), 0});
      if (auto ok = Sync(sub_from->get(), sub_to->get(), rel, walk, depth + 1); !ok) return ok;
    } else if (!S_ISREG(st.st_mode)) {
      walk.dropped->push_back(fmt::format("{} {} not copied", KindOf(st.st_mode), rel));
    } else if (walk.from_sandbox && st.st_nlink > 1) {
      walk.dropped->push_back(fmt::format("hardlink {} not copied", rel));
    } else if (existing != to->end() && S_ISREG(existing->second.st_mode) &&
               SameContentLikely(st, existing->second)) {
      continue;
    } else if (st.st_size > *walk.budget) {
      if (!walk.from_sandbox) return std::unexpected(Error{rel, "does not fit in the storage quota", ENOSPC});
      walk.dropped->push_back(fmt::format("{} ({} bytes) exceeds what the storage quota allows; not copied", rel, st.st_size));
    } else {
      if (existing != to->end() && S_ISDIR(existing->second.st_mode)) {
        if (auto ok = RemoveTree(to_dir, name, true, depth); !ok) return ok;
      }
      if (auto ok = CopyFile(from_dir, name, st, to_dir, walk.owner); !ok) return ok;
      *walk.budget -= st.st_size;
    }
  }
  if (!walk.from_sandbox) return {};
  for (const auto& [name, st] : *to) {
    if (from->contains(name) || !Crosses(st)) continue;
    if (auto ok = RemoveTree(to_dir, name, S_ISDIR(st.st_mode), depth); !ok) return ok;
  }
  return {};
}

}  // namespace

Expected<void> CopyIn(int from_dir, int to_dir, Owner owner, int64_t* budget,
                      std::vector<std::string>* dropped) {
  return Sync(from_dir, to_dir, "", Walk{owner, false, budget, dropped}, 0);
}

Expected<void> CopyBack(int sandbox_dir, int host_dir, Owner owner, int64_t budget,
                        std::vector<std::string>* dropped) {
  return Sync(sandbox_dir, host_dir, "", Walk{owner, true, &budget, dropped}, 0);
}

}  // namespace smolbox::ns
