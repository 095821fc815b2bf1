#include "sandbox_state.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <thread>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "json_bounds.h"
#include "state.h"

namespace smolbox::persist {
namespace {

constexpr size_t kMaxNameLength = 63;
// info.json and dead are a few hundred bytes; anything larger was not written by a keeper.
constexpr size_t kMaxStateFileBytes = 64 << 10;

// Reads a small regular file in dir_fd, refusing symlinks and anything large.
std::optional<std::string> ReadSmallFile(int dir_fd, const char* file) {
  UniqueFd fd(openat(dir_fd, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid()) return std::nullopt;
  struct stat st{};
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > static_cast<off_t>(kMaxStateFileBytes)) {
    return std::nullopt;
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  ssize_t n = read(fd.get(), text.data(), text.size());
  if (n < 0) return std::nullopt;
  text.resize(static_cast<size_t>(n));
  return text;
}

// Written to a temp name and renamed: a reader sees the old file or the new, never half.
Expected<void> WriteFileAtomically(int dir_fd, const char* file, const std::string& text) {
  std::string temp = fmt::format(".{}.tmp", file);
  unlinkat(dir_fd, temp.c_str(), 0);
  UniqueFd fd(openat(dir_fd, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return std::unexpected(Error::Sys(fmt::format("create {}", temp)));
  if (write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return std::unexpected(Error::Sys(fmt::format("write {}", temp)));
  }
  if (renameat(dir_fd, temp.c_str(), dir_fd, file) != 0) {
    return std::unexpected(Error::Sys(fmt::format("rename {} to {}", temp, file)));
  }
  return {};
}

}  // namespace

Expected<void> ValidateName(const std::string& name) {
  auto fail = [&](const std::string& why) {
    return std::unexpected(Error::Field("name", fmt::format("{:?} {}", name, why)));
  };
  if (name.empty()) return fail("is empty");
  if (name.size() > kMaxNameLength) return fail(fmt::format("is longer than {} characters", kMaxNameLength));
  if (!std::isalnum(static_cast<unsigned char>(name[0]))) return fail("must start with a letter or a digit");
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') {
      return fail("may hold only letters, digits, '_', '.' and '-'");
    }
  }
  return {};
}

Expected<std::string> SandboxesDir() {
  SMOLBOX_ASSIGN_OR_RETURN(auto root, shared::StateRoot());
  std::string dir = root + "/sandboxes";
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return std::unexpected(Error::Sys("mkdir " + dir));
  struct stat st{};
  if (lstat(dir.c_str(), &st) != 0) return std::unexpected(Error::Sys("lstat " + dir));
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    return std::unexpected(Error{dir, "is not a private directory owned by this user; refusing it", 0});
  }
  return dir;
}

Expected<UniqueFd> OpenSandboxDir(const std::string& name) {
  SMOLBOX_TRY(ValidateName(name));
  SMOLBOX_ASSIGN_OR_RETURN(auto dir, SandboxesDir());
  UniqueFd fd(open((dir + "/" + name).c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid() && errno == ENOENT) {
    return std::unexpected(Error{"name", fmt::format("no sandbox named {:?} (smolbox ls lists them)", name), 0});
  }
  if (!fd.valid()) return std::unexpected(Error::Sys(fmt::format("open sandbox {:?}", name)));
  return fd;
}

Expected<void> WriteInfo(int dir_fd, const KeeperInfo& info) {
  nlohmann::json j = {{"backend", info.backend}, {"isolation", info.isolation}, {"created", info.created},
                      {"keeper_pid", info.pid}, {"keeper_start_time", info.start_time},
                      {"exec_timeout_ms", info.exec_timeout_ms}};
  return WriteFileAtomically(dir_fd, kInfoFile, j.dump() + "\n");
}

std::optional<KeeperInfo> ReadInfo(int dir_fd) {
  auto text = ReadSmallFile(dir_fd, kInfoFile);
  if (!text) return std::nullopt;
  auto parsed = ParseBoundedJson(*text, {.max_bytes = kMaxStateFileBytes}, kInfoFile);
  if (!parsed || !parsed->is_object()) return std::nullopt;
  const nlohmann::json& j = *parsed;
  try {
    return KeeperInfo{j.at("backend").get<std::string>(), j.at("isolation").get<std::string>(),
                      j.at("created").get<std::string>(), IntegerAt<pid_t>(j, "keeper_pid"),
                      IntegerAt<unsigned long long>(j, "keeper_start_time"),
                      j.contains("exec_timeout_ms") ? IntegerAt<int64_t>(j, "exec_timeout_ms") : 0};
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

namespace {

// True when one of pid's descriptors is the directory behind dir_fd.
bool HoldsDirectory(pid_t pid, int dir_fd) {
  struct stat want{};
  if (fstat(dir_fd, &want) != 0) return false;
  DIR* fds = opendir(fmt::format("/proc/{}/fd", pid).c_str());
  if (fds == nullptr) return false;
  bool held = false;
  while (dirent* entry = readdir(fds)) {
    struct stat st{};
    // stat through the descriptor's link: the object itself, opened by nobody here.
    if (entry->d_name[0] != '.' && fstatat(dirfd(fds), entry->d_name, &st, 0) == 0 && S_ISDIR(st.st_mode) &&
        st.st_dev == want.st_dev && st.st_ino == want.st_ino) {
      held = true;
      break;
    }
  }
  closedir(fds);
  return held;
}

}  // namespace

bool KeeperAlive(const KeeperInfo& info, int dir_fd) {
  if (info.pid <= 0) return false;
  auto start = shared::ProcessStartTime(info.pid);
  return start && *start == info.start_time && HoldsDirectory(info.pid, dir_fd);
}

std::optional<std::string> ReadDeathReason(int dir_fd) {
  auto reason = ReadSmallFile(dir_fd, kDeadFile);
  // Written as a line; read as a phrase that messages go on after.
  while (reason && !reason->empty() && (reason->back() == '\n' || reason->back() == ' ')) reason->pop_back();
  return reason;
}

Expected<void> WriteDeathReason(int dir_fd, const std::string& reason) {
  return WriteFileAtomically(dir_fd, kDeadFile, reason);
}

namespace {

// The whole lock file, for writing: the one lock a sandbox has.
struct flock WholeFileWriteLock() {
  struct flock lock{};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  return lock;
}

Expected<UniqueFd> OpenLockFile(int dir_fd) {
  UniqueFd fd(openat(dir_fd, kLockFile, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return std::unexpected(Error::Sys("open the sandbox's lock"));
  return fd;
}

}  // namespace

Expected<UniqueFd> TryLock(int dir_fd) {
  auto fd = OpenLockFile(dir_fd);
  if (!fd) return fd;
  struct flock lock = WholeFileWriteLock();
  if (fcntl(fd->get(), F_OFD_SETLK, &lock) != 0) {
    if (errno == EAGAIN || errno == EACCES) return UniqueFd();
    return std::unexpected(Error::Sys("lock the sandbox's lock file"));
  }
  return fd;
}

Expected<UniqueFd> TryLockPastForks(int dir_fd) {
  constexpr auto kForkWindow = std::chrono::seconds(2);
  auto deadline = std::chrono::steady_clock::now() + kForkWindow;
  for (;;) {
    auto lock = TryLock(dir_fd);
    if (!lock || lock->valid() || std::chrono::steady_clock::now() >= deadline) return lock;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

Expected<bool> IsLocked(int dir_fd) {
  SMOLBOX_ASSIGN_OR_RETURN(auto fd, OpenLockFile(dir_fd));
  struct flock lock = WholeFileWriteLock();
  if (fcntl(fd.get(), F_OFD_GETLK, &lock) != 0) return std::unexpected(Error::Sys("test the sandbox's lock"));
  return lock.l_type != F_UNLCK;
}

std::string PathInDir(int dir_fd, const char* file) { return fmt::format("/proc/self/fd/{}/{}", dir_fd, file); }

Expected<ControlSocket> NewControlSocket(int dir_fd) {
  ControlSocket control;
  control.fd.Reset(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!control.fd.valid()) return std::unexpected(Error::Sys("socket"));
  control.address.sun_family = AF_UNIX;
  std::string path = PathInDir(dir_fd, kControlSocket);
  if (path.size() >= sizeof control.address.sun_path) {
    return std::unexpected(Error{"control socket", "path too long", 0});
  }
  path.copy(control.address.sun_path, path.size());
  return control;
}

std::string ToString(SandboxStatus status) {
  switch (status) {
    case SandboxStatus::kStarting: return "starting";
    case SandboxStatus::kRunning: return "running";
    case SandboxStatus::kBusy: return "busy";
    case SandboxStatus::kDead: return "dead";
  }
  return "dead";
}

SandboxListing Inspect(const std::string& name, int dir_fd) {
  SandboxListing listing{name, SandboxStatus::kDead, ReadInfo(dir_fd), ""};
  auto is_locked = IsLocked(dir_fd);
  bool locked = is_locked && *is_locked;
  if (!listing.info) {
    // `smolbox create` holds the lock until the keeper has written info.json.
    listing.status = locked ? SandboxStatus::kStarting : SandboxStatus::kDead;
    if (!locked) listing.reason = "it never finished starting";
    return listing;
  }
  if (auto reason = ReadDeathReason(dir_fd)) {
    listing.reason = *reason;
  } else if (!KeeperAlive(*listing.info, dir_fd)) {
    listing.reason = "its keeper process is gone";
  } else {
    listing.status = locked ? SandboxStatus::kBusy : SandboxStatus::kRunning;
  }
  return listing;
}

Expected<std::vector<SandboxListing>> ListSandboxes() {
  SMOLBOX_ASSIGN_OR_RETURN(auto dir, SandboxesDir());
  UniqueFd fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return std::unexpected(Error::Sys("open " + dir));
  DIR* stream = fdopendir(dup(fd.get()));
  if (stream == nullptr) return std::unexpected(Error::Sys("opendir " + dir));
  std::vector<SandboxListing> out;
  while (dirent* entry = readdir(stream)) {
    std::string name = entry->d_name;
    if (!ValidateName(name)) continue;  // ".", "..", and nothing a create would have made
    UniqueFd sandbox(openat(fd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (sandbox.valid()) out.push_back(Inspect(name, sandbox.get()));
  }
  closedir(stream);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

Expected<void> RemoveSandboxDir(const std::string& name) {
  SMOLBOX_ASSIGN_OR_RETURN(auto dir, SandboxesDir());
  SMOLBOX_ASSIGN_OR_RETURN(auto fd, OpenSandboxDir(name));
  DIR* stream = fdopendir(dup(fd.get()));
  if (stream == nullptr) return std::unexpected(Error::Sys("opendir sandbox " + name));
  std::vector<std::string> files;
  while (dirent* entry = readdir(stream)) {
    std::string file = entry->d_name;
    if (file != "." && file != "..") files.push_back(file);
  }
  closedir(stream);
  for (const auto& file : files) {
    // unlinkat never follows a symlink: a planted one is removed, not its target.
    if (unlinkat(fd.get(), file.c_str(), 0) != 0 && errno != ENOENT) {
      return std::unexpected(Error::Sys(fmt::format("remove {}/{}/{}", dir, name, file)));
    }
  }
  UniqueFd parent(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!parent.valid() || unlinkat(parent.get(), name.c_str(), AT_REMOVEDIR) != 0) {
    return std::unexpected(Error::Sys(fmt::format("rmdir {}/{}", dir, name)));
  }
  return {};
}

}  // namespace smolbox::persist
