#include "state.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "cgroup.h"
#include "owned_dir.h"

namespace smolbox::shared {
namespace {

std::string RandomId() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}", rd(), rd());
}

std::string RunsDir(const std::string& root) { return root + "/runs"; }

void RemoveRunDir(const std::string& path) {
  // The storage is mounted here only for an instant during setup; a runtime killed in that
  // instant leaves the mount behind.
  umount2((path + "/storage").c_str(), MNT_DETACH);
  rmdir((path + "/storage").c_str());
  rmdir((path + "/root").c_str());
  unlink((path + "/owner").c_str());
  unlink((path + "/owner.new").c_str());
  rmdir(path.c_str());
}

// True when the runtime that wrote `owner` is still running.
bool OwnerAlive(const std::string& run_path) {
  std::ifstream in(run_path + "/owner");
  int pid = 0;
  unsigned long long start = 0;
  if (!(in >> pid >> start) || pid <= 0) {
    // No owner yet, or not a whole one: a runtime starting right now, unless the dir is old.
    struct stat st{};
    return lstat(run_path.c_str(), &st) == 0 && time(nullptr) - st.st_mtime < 60;
  }
  auto now = ProcessStartTime(pid);
  return now && *now == start;
}

}  // namespace

Expected<std::string> StateRoot() {
  std::string root;
  if (geteuid() == 0) {
    root = "/run/smolbox";
  } else if (const char* xdg = getenv("XDG_RUNTIME_DIR"); xdg && *xdg == '/') {
    root = std::string(xdg) + "/smolbox";
  } else {
    root = fmt::format("/tmp/smolbox-{}", geteuid());
  }
  // 0711: the sandbox's setup runs as a mapped uid and must traverse to its mountpoint.
  SMOLBOX_TRY(EnsureOwnedDir(root, 0711));
  SMOLBOX_TRY(EnsureOwnedDir(RunsDir(root), 0711));
  return root;
}

Expected<std::string> CacheDir() {
  auto root = StateRoot();
  if (!root) return root;
  std::string dir = *root + "/cache";
  SMOLBOX_TRY(EnsureOwnedDir(dir, 0700));
  return dir;
}

Expected<unsigned long long> ProcessStartTime(int pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(in, line)) return std::unexpected(Error{"read /proc/<pid>/stat", "gone", ESRCH});
  // The command name may hold spaces and parentheses; fields resume after the last ')'.
  auto close = line.rfind(')');
  if (close == std::string::npos) return std::unexpected(Error{"parse /proc/<pid>/stat", "bad", 0});
  std::istringstream fields(line.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    // A zombie has ended; only its parent has not collected it yet (a killed keeper's
    // parent is init, which may take its time).
    if (i == 3 && (field == "Z" || field == "X")) return std::unexpected(Error{"/proc/<pid>/stat", "exited", ESRCH});
    if (i == 22) return std::stoull(field);
  }
  return std::unexpected(Error{"parse /proc/<pid>/stat", "too few fields", 0});
}

Expected<RunDir> RunDir::Create() {
  SMOLBOX_ASSIGN_OR_RETURN(auto root, StateRoot());
  std::string id = RandomId();
  std::string path = RunsDir(root) + "/" + id;
  if (mkdir(path.c_str(), 0711) != 0) return std::unexpected(Error::Sys("mkdir " + path));
  RunDir dir(id, path);
  if (mkdir(dir.RootMountpoint().c_str(), 0755) != 0) {
    return std::unexpected(Error::Sys("mkdir " + dir.RootMountpoint()));
  }
  SMOLBOX_ASSIGN_OR_RETURN(auto start, ProcessStartTime(getpid()));
  // Written aside and renamed into place: a concurrent sweep must never read a half-written
  // owner, which it would take for a dead runtime's and remove the run dir under us.
  std::string content = fmt::format("{} {}\n", getpid(), start);
  std::string staged = path + "/owner.new";
  int fd = open(staged.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return std::unexpected(Error::Sys("create " + staged));
  bool written = write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  close(fd);
  if (!written) return std::unexpected(Error::Sys("write " + staged));
  if (rename(staged.c_str(), (path + "/owner").c_str()) != 0) {
    return std::unexpected(Error::Sys("rename " + staged));
  }
  return dir;
}

RunDir::~RunDir() {
  if (!path_.empty()) RemoveRunDir(path_);
}

void SweepStaleRuns() {
  auto root = StateRoot();
  if (!root) return;
  std::string runs = RunsDir(*root);
  DIR* dir = opendir(runs.c_str());
  if (!dir) return;
  while (dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    std::string path = runs + "/" + name;
    if (OwnerAlive(path)) continue;
    RemoveStaleCgroups(name);
    RemoveRunDir(path);
  }
  closedir(dir);
}

}  // namespace smolbox::shared
