// Where a persistent sandbox lives on the host, and how to tell whether it still does.
//
// Layout: <state root>/sandboxes/<name>/   (0700; the state root is shared::StateRoot())
//   lock          write-locked (an OFD lock) by `smolbox exec` for the length of an exec, and by
//                 `smolbox create` until the sandbox is ready: a held lock means busy
//   info.json     written by the keeper once the sandbox is up: backend, isolation, created,
//                 and the keeper's pid and kernel start time (a recycled pid is not the keeper)
//   control.sock  the keeper's unix socket: exec and stop requests
//   dead          why the sandbox died, written by the keeper when its agent or VM ended
//
// The keeper is the process that holds the sandbox (its Session): see keeper.h.
#pragma once

#include <sys/types.h>
#include <sys/un.h>

#include <optional>
#include <string>
#include <vector>

#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::persist {

inline constexpr const char* kLockFile = "lock";
inline constexpr const char* kInfoFile = "info.json";
inline constexpr const char* kControlSocket = "control.sock";
inline constexpr const char* kDeadFile = "dead";

// A name is 1-63 of [a-zA-Z0-9_.-], starting with a letter or digit: it is a path component.
Expected<void> ValidateName(const std::string& name);

// <state root>/sandboxes, created 0700 and checked to be ours.
Expected<std::string> SandboxesDir();

struct KeeperInfo {
  std::string backend;
  std::string isolation;
  std::string created;  // ISO 8601, UTC
  pid_t pid = 0;
  unsigned long long start_time = 0;
  // The timeout of an exec that sets none, so that a client knows how long a result may take;
  // 0 in the info of a keeper that predates it.
  int64_t exec_timeout_ms = 0;
};

// The sandbox's directory, opened without following a symlink. ENOENT becomes
// "no sandbox named ...".
Expected<UniqueFd> OpenSandboxDir(const std::string& name);

// Writes info.json atomically (a temp file renamed over it).
Expected<void> WriteInfo(int dir_fd, const KeeperInfo& info);
std::optional<KeeperInfo> ReadInfo(int dir_fd);
// True when info's keeper is the process running under that pid now, and it holds the
// sandbox's directory (dir_fd) open, as a keeper does for its whole life. A forged or stale
// info.json that names another process, even one of this user's, is not taken for the keeper:
// nothing would otherwise stop `smolbox rm` from killing it.
bool KeeperAlive(const KeeperInfo& info, int dir_fd);
// The dead file's reason, if there is one.
std::optional<std::string> ReadDeathReason(int dir_fd);
Expected<void> WriteDeathReason(int dir_fd, const std::string& reason);

// Tries to take the sandbox's lock without waiting; an invalid fd when someone holds it. The
// lock is an open file description lock, held while the returned fd (or a copy of it) is open.
Expected<UniqueFd> TryLock(int dir_fd);
// TryLock, tried again for up to 2 s while it finds the lock held. A process forked on another
// thread (the API server starts runs all the time) holds a copy of a lock fd until it execs and
// the copy closes on exec: the last exec's lock looks held for that while after it ended, which
// under a burst on two cores was more than 250 ms. An exec that really runs holds it as long as
// it runs, so a second exec waits for a short one and is told busy during a long one.
Expected<UniqueFd> TryLockPastForks(int dir_fd);
// Whether someone holds the sandbox's lock, asked without taking it: a listing that took the
// lock, even for a moment, would make an exec that starts in that moment fail as busy.
Expected<bool> IsLocked(int dir_fd);

// A path that reaches `file` in the directory dir_fd through /proc/self/fd: unix socket paths
// are limited to 108 bytes, and this also pins the directory we opened.
std::string PathInDir(int dir_fd, const char* file);

// The sandbox's control socket (kControlSocket in dir_fd): a fresh unix stream socket and
// the address to bind or connect it to.
struct ControlSocket {
  UniqueFd fd;
  sockaddr_un address{};
};
Expected<ControlSocket> NewControlSocket(int dir_fd);

enum class SandboxStatus { kStarting, kRunning, kBusy, kDead };
std::string ToString(SandboxStatus status);

struct SandboxListing {
  std::string name;
  SandboxStatus status = SandboxStatus::kDead;
  std::optional<KeeperInfo> info;
  std::string reason;  // why it is dead
};

SandboxListing Inspect(const std::string& name, int dir_fd);
Expected<std::vector<SandboxListing>> ListSandboxes();

// Removes the sandbox's directory and the files in it (no subdirectories are expected; any
// found is left and reported).
Expected<void> RemoveSandboxDir(const std::string& name);

}  // namespace smolbox::persist
