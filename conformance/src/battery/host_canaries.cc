#include "battery/host_canaries.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pwd.h>
#include <sys/ipc.h>
#include <sys/random.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "battery/canaries.h"
#include "launch/host_files.h"
#include "unique_fd.h"

namespace smolvm_check {
namespace {

using smolbox::Error;
using smolbox::UniqueFd;

constexpr size_t kShmBytes = 4096;

Expected<std::string> FreshName(const std::string& prefix) {
  SMOLBOX_ASSIGN_OR_RETURN(auto hex, RandomHex(8));
  return prefix + hex;
}

// DIR/NAME, without doubling the slash of "/".
std::string PathIn(const std::string& dir, const std::string& name) {
  return dir == "/" ? "/" + name : dir + "/" + name;
}

// The invoking user's home, when it is a directory of its own (not "/", as for daemons).
std::string HomeDir() {
  const passwd* pw = getpwuid(getuid());
  if (!pw || !pw->pw_dir || std::strlen(pw->pw_dir) < 2 || pw->pw_dir[0] != '/') return "";
  return pw->pw_dir;
}

void AddUnique(std::vector<std::string>& dirs, const std::string& dir) {
  if (!dir.empty() && std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
}

// Where a sandbox that hides only /tmp would still show the payload the host's files.
std::vector<std::string> CanaryDirs() {
  std::vector<std::string> dirs;
  AddUnique(dirs, HomeDir());
  if (geteuid() == 0) AddUnique(dirs, "/root");
  for (const char* dir : {"/var/tmp", "/srv", "/opt"}) AddUnique(dirs, dir);
  AddUnique(dirs, fmt::format("/run/user/{}", getuid()));
  AddUnique(dirs, "/dev/shm");
  return dirs;
}

// Every host directory a workload might write into: the root's skeleton, the homes, the
// scratch places. A sandbox shows its own in their place, or none.
std::vector<std::string> WriteDirs() {
  std::vector<std::string> dirs = {"/", "/etc", "/usr", "/var", "/opt", "/srv", "/home", "/root", "/mnt"};
  AddUnique(dirs, HomeDir());
  for (const char* dir : {"/var/tmp", "/dev/shm", "/tmp"}) AddUnique(dirs, dir);
  AddUnique(dirs, fmt::format("/run/user/{}", getuid()));
  return dirs;
}

// The directory itself, never a link in its place.
UniqueFd OpenDir(const std::string& dir) {
  return UniqueFd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

}  // namespace

Expected<std::unique_ptr<HostWideCanaries>> HostWideCanaries::Plant() {
  std::unique_ptr<HostWideCanaries> canaries(new HostWideCanaries());
  SMOLBOX_TRY(canaries->PlantFiles());
  SMOLBOX_TRY(canaries->PlantSharedMemory());
  canaries->AddMachineId();
  char hostname[256] = {};
  if (gethostname(hostname, sizeof hostname - 1) == 0) canaries->hints_["host_hostname"] = hostname;
  canaries->write_dirs_ = WriteDirs();
  SMOLBOX_ASSIGN_OR_RETURN(canaries->write_probe_, FreshName("smolvm-check-write-"));
  canaries->hints_["write_dirs"] = fmt::format("{}", fmt::join(canaries->write_dirs_, ":"));
  canaries->hints_["write_probe"] = canaries->write_probe_;
  return canaries;
}

HostWideCanaries::~HostWideCanaries() {
  for (const auto& [dir, name] : planted_) {
    UniqueFd dir_fd = OpenDir(dir);
    if (dir_fd.valid()) unlinkat(dir_fd.get(), name.c_str(), 0);
  }
  if (shm_id_ >= 0) shmctl(shm_id_, IPC_RMID, nullptr);
}

// A directory that does not exist, or that this user cannot write, gets none: the canary is
// only as strong as the places the runner can reach.
Expected<void> HostWideCanaries::PlantFiles() {
  std::vector<std::string> files;
  for (const auto& dir : CanaryDirs()) {
    UniqueFd dir_fd = OpenDir(dir);
    if (!dir_fd.valid()) continue;
    SMOLBOX_ASSIGN_OR_RETURN(auto name, FreshName(kHostCanaryPrefix));
    UniqueFd fd(openat(dir_fd.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!fd.valid()) continue;
    planted_.emplace_back(dir, name);
    SMOLBOX_ASSIGN_OR_RETURN(auto token, NewCanaryToken());
    // Readable by every uid: only the sandbox, not the file's mode, may keep a payload out.
    std::string line = token + "\n";
    if (fchmod(fd.get(), 0644) != 0 || write(fd.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      return std::unexpected(Error::Sys(fmt::format("write the host canary {}/{}", dir, name)));
    }
    tokens_["host_file:" + dir] = token;
    files.push_back(PathIn(dir, name));
  }
  hints_["host_canary_files"] = fmt::format("{}", fmt::join(files, ":"));
  hints_["host_canary_prefix"] = kHostCanaryPrefix;
  return {};
}

Expected<void> HostWideCanaries::PlantSharedMemory() {
  SMOLBOX_ASSIGN_OR_RETURN(auto token, NewCanaryToken());
  for (int attempt = 0; attempt < 8 && shm_id_ < 0; ++attempt) {
    int32_t key = 0;
    if (getrandom(&key, sizeof key, 0) != sizeof key) return std::unexpected(Error::Sys("getrandom"));
    if (key == IPC_PRIVATE) continue;
    int id = shmget(key, kShmBytes, IPC_CREAT | IPC_EXCL | 0644);
    if (id < 0 && errno == EEXIST) continue;
    if (id < 0) return std::unexpected(Error::Sys("shmget the host's IPC canary"));
    shm_id_ = id;
    void* at = shmat(id, nullptr, 0);
    if (at == reinterpret_cast<void*>(-1)) return std::unexpected(Error::Sys("shmat the host's IPC canary"));
    std::memcpy(at, token.data(), token.size());
    shmdt(at);
    tokens_["host_ipc"] = token;
    hints_["ipc_key"] = std::to_string(key);
  }
  if (shm_id_ < 0) return std::unexpected(Error{"the host's IPC canary", "no free key after 8 tries", 0});
  return {};
}

// The host's identity, 32 hex digits: a sandbox that shows it says which host it runs on.
void HostWideCanaries::AddMachineId() {
  std::string id = ReadUpTo("/etc/machine-id", 64);
  while (!id.empty() && std::isspace(static_cast<unsigned char>(id.back()))) id.pop_back();
  bool hex = id.size() == 32 && std::all_of(id.begin(), id.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
  if (hex) tokens_["host_machine_id"] = id;
}

std::vector<std::string> HostWideCanaries::HostWrites() const {
  std::vector<std::string> appeared;
  for (const auto& dir : write_dirs_) {
    UniqueFd dir_fd = OpenDir(dir);
    if (!dir_fd.valid()) continue;
    struct stat st{};
    if (fstatat(dir_fd.get(), write_probe_.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    std::string path = PathIn(dir, write_probe_);
    appeared.push_back(fmt::format("host {} appeared", path));
    // A link is removed as a link; a directory only when it is empty.
    if (unlinkat(dir_fd.get(), write_probe_.c_str(), S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) != 0) {
      appeared.back() += fmt::format(" (and could not be removed: {})", std::strerror(errno));
    }
  }
  return appeared;
}

}  // namespace smolvm_check
