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
#include "host_root.h"
#include "owned_dir.h"

namespace smolbox::shared {
namespace {

std::string RandomId() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}", rd(), rd());
}

std::string RunsDir(const std::string& root) { return root + "/runs"; }

// A run dir being made is named "<this><pid>-<start time>-<id>" until it is whole.
constexpr std::string_view kStagingPrefix = ".new-";

void RemoveRunDir(const std::string& path) {
  // The storage is mounted here only for an instant during setup; a runtime killed in that
  // instant leaves the mount behind.
  umount2((path + "/storage").c_str(), MNT_DETACH);
  rmdir((path + "/storage").c_str());
  rmdir((path + "/root").c_str());
  // An OCI engine's image, idmapped (ns/idmapped_image.h), mounted in the runtime's own private
  // mount namespace: gone with a dead runtime, unmounted by a live one.
  umount2((path + "/image").c_str(), MNT_DETACH);
  rmdir((path + "/image").c_str());
  unlink((path + "/owner").c_str());
  rmdir(path.c_str());
}

bool ProcessAlive(int pid, unsigned long long start) {
  auto now = ProcessStartTime(pid);
  return now && *now == start;
}

// For a run dir still being made, "<prefix><pid>-<start>-<id>": whether its runtime lives.
bool StagingOwnerAlive(const std::string& name) {
  int pid = 0;
  unsigned long long start = 0;
  if (sscanf(name.c_str() + kStagingPrefix.size(), "%d-%llu-", &pid, &start) != 2 || pid <= 0) return false;
  return ProcessAlive(pid, start);
}

// True when the runtime that wrote `owner` is still running.
bool OwnerAlive(const std::string& run_path) {
  std::ifstream in(run_path + "/owner");
  int pid = 0;
  unsigned long long start = 0;
  if (!(in >> pid >> start) || pid <= 0) {
    // A run dir comes whole with its owner (RunDir::Create); one without, or with a partial
    // one, is damaged or an older runtime's that is starting right now. Old, it is litter.
    struct stat st{};
    return lstat(run_path.c_str(), &st) == 0 && time(nullptr) - st.st_mtime < 60;
  }
  return ProcessAlive(pid, start);
}

}  // namespace

Expected<std::string> StateRoot() {
  std::string root;
  if (IsHostRoot()) {
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

namespace {

// The fields of /proc/<pid>/stat from the third on (the state letter first).
Expected<std::string> StatFieldsAfterName(int pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(in, line)) return std::unexpected(Error{"read /proc/<pid>/stat", "gone", ESRCH});
  // The command name may hold spaces and parentheses; fields resume after the last ')'.
  auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) {
    return std::unexpected(Error{"parse /proc/<pid>/stat", "bad", 0});
  }
  return line.substr(close + 2);
}

}  // namespace

bool ProcessStopped(int pid) {
  auto fields = StatFieldsAfterName(pid);
  return fields && (fields->front() == 'T' || fields->front() == 't');
}

Expected<unsigned long long> ProcessStartTime(int pid) {
  SMOLBOX_ASSIGN_OR_RETURN(auto after_name, StatFieldsAfterName(pid));
  std::istringstream fields(after_name);
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
  SMOLBOX_ASSIGN_OR_RETURN(auto start, ProcessStartTime(getpid()));
  // Made whole under a name that says whose it is, then renamed into place: a sweep never meets
  // a run dir without its owner, and one whose runtime was killed midway is known dead by name.
  std::string staging = RunsDir(root) + "/" + fmt::format("{}{}-{}-{}", kStagingPrefix, getpid(), start, id);
  if (mkdir(staging.c_str(), 0711) != 0) return std::unexpected(Error::Sys("mkdir " + staging));
  RunDir dir(id, staging);  // removed again if anything below fails
  std::ofstream owner(staging + "/owner");
  owner << getpid() << ' ' << start << '\n';
  if (!owner.flush()) return std::unexpected(Error::Sys("write " + staging + "/owner"));
  if (mkdir((staging + "/root").c_str(), 0755) != 0) return std::unexpected(Error::Sys("mkdir " + staging + "/root"));
  if (rename(staging.c_str(), path.c_str()) != 0) return std::unexpected(Error::Sys("rename " + staging));
  dir.path_ = path;
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
    if (name.starts_with(kStagingPrefix)) {
      if (!StagingOwnerAlive(name)) RemoveRunDir(path);
      continue;
    }
    if (OwnerAlive(path)) continue;
    RemoveStaleCgroups(name);
    RemoveRunDir(path);
  }
  closedir(dir);
}

}  // namespace smolbox::shared
