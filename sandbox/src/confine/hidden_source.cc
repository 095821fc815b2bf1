#include "hidden_source.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "mount.h"

namespace smolbox::confine {
namespace {

Expected<std::string> MakeTempDir(const std::string& root, const char* prefix) {
  std::string path = root + "/" + prefix + "XXXXXX";
  if (mkdtemp(path.data()) == nullptr) return std::unexpected(Error::Sys("mkdtemp " + path));
  return path;
}

bool IsOctal(char c) { return c >= '0' && c <= '7'; }

// Mount points in /proc/self/mountinfo escape space, tab, newline and backslash as \ooo.
std::string Unescape(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && IsOctal(field[i + 1]) &&
        IsOctal(field[i + 2]) && IsOctal(field[i + 3])) {
      out += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                               (field[i + 3] - '0'));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

bool StrictlyBelow(const std::string& dir, const std::string& path) {
  if (dir == "/") return path != "/";
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
         path[dir.size()] == '/';
}

}  // namespace

Expected<SourceHider> SourceHider::Create(const std::string& root) {
  SMOLBOX_ASSIGN_OR_RETURN(auto empty_point, MakeTempDir(root, ".smolbox-empty-"));
  auto stage_point = MakeTempDir(root, ".smolbox-stage-");
  if (!stage_point) {
    rmdir(empty_point.c_str());
    return std::unexpected(stage_point.error());
  }
  // The empty layer is a tmpfs of its own, not a directory of the new root that is removed
  // afterwards: overlayfs lists a merged directory with a removed layer as empty. A detached
  // mount lives on while the overlays hold it, and the sandbox's root keeps no trace of it.
  SourceHider hider(empty_point, *stage_point, UniqueFd());
  if (mount("tmpfs", empty_point.c_str(), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
            "size=4k,mode=0555") != 0) {
    return std::unexpected(Error::Sys("mount the empty overlay layer on " + empty_point));
  }
  hider.empty_.Reset(open(empty_point.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!hider.empty_.valid()) return std::unexpected(Error::Sys("open " + empty_point));
  return hider;
}

SourceHider::SourceHider(SourceHider&& other) noexcept
    : empty_point_(std::exchange(other.empty_point_, {})),
      stage_point_(std::exchange(other.stage_point_, {})),
      empty_(std::move(other.empty_)),
      staged_(std::exchange(other.staged_, false)) {}

SourceHider::~SourceHider() {
  Unstage();
  empty_.Reset();
  if (!empty_point_.empty()) {
    umount2(empty_point_.c_str(), MNT_DETACH);
    rmdir(empty_point_.c_str());
  }
  if (!stage_point_.empty()) rmdir(stage_point_.c_str());
}

Expected<void> SourceHider::MountDirectory(int dir_fd, const std::string& target) const {
  // Two lower layers and no upper one: read-only by construction. Without "userxattr" the
  // overlay reads only trusted.* xattrs, which a user namespace cannot see, so nothing stored
  // in the source's own xattrs can redirect or hide what the workload sees.
  std::string options = fmt::format("lowerdir={}:{}", FdPath(dir_fd), FdPath(empty_.get()));
  unsigned long flags = MS_RDONLY | MS_NOSUID | MS_NODEV | NoexecOf(dir_fd);
  if (mount("overlay", target.c_str(), "overlay", flags, options.c_str()) != 0) {
    return std::unexpected(
        Error::Sys(fmt::format("mount overlay of {} on {}", FdPath(dir_fd), target)));
  }
  return {};
}

Expected<std::string> SourceHider::Stage(int dir_fd) {
  Unstage();
  SMOLBOX_TRY(MountDirectory(dir_fd, stage_point_));
  staged_ = true;
  return stage_point_;
}

void SourceHider::Unstage() {
  // Binds made from the staged overlay keep its superblock; only the staging mount goes.
  if (staged_) umount2(stage_point_.c_str(), MNT_DETACH);
  staged_ = false;
}

std::optional<std::string> MountsInTheWay(int fd, bool is_dir) {
  std::string path = ResolvedPath(fd);
  if (path.empty() || path[0] != '/') return "its path cannot be read back from its descriptor";
  std::ifstream mountinfo("/proc/self/mountinfo");
  for (std::string line; std::getline(mountinfo, line);) {
    std::istringstream fields(line);
    std::string id, parent, device, root, point;
    if (!(fields >> id >> parent >> device >> root >> point)) continue;
    point = Unescape(point);
    if (is_dir && StrictlyBelow(path, point)) return fmt::format("{} is mounted inside it", point);
    if (!is_dir && point == path) return "a mount is over it";
  }
  return std::nullopt;
}

unsigned long NoexecOf(int fd) {
  struct statvfs st{};
  return statvfs(FdPath(fd).c_str(), &st) == 0 && (st.f_flag & ST_NOEXEC) ? MS_NOEXEC : 0;
}

std::string ResolvedPath(int fd) {
  char path[PATH_MAX];
  ssize_t n = readlink(FdPath(fd).c_str(), path, sizeof path);
  if (n <= 0 || n == static_cast<ssize_t>(sizeof path)) return "";
  return std::string(path, static_cast<size_t>(n));
}

}  // namespace smolbox::confine
