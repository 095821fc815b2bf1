// Where the runtime keeps per-run state, and the sweep that removes what a killed
// runtime left behind.
//
// Layout: <state root>/runs/<run id>/{owner, root/}, <state root>/cache/
//   root:     /run/smolbox
//   rootless: $XDG_RUNTIME_DIR/smolbox, else /tmp/smolbox-<uid>
// `owner` holds "<pid> <starttime>" of the runtime, so a later runtime can tell a live run from
// a stale one even when the pid has been recycled. A run dir is made as
// runs/.new-<pid>-<starttime>-<id> and renamed when whole, so that one whose runtime was killed
// while making it is known stale by its name.
#pragma once

#include <string>

#include "smolbox/error.h"

namespace smolbox::shared {

// The state root for this uid, created 0711 and checked to be ours and not a symlink.
Expected<std::string> StateRoot();
// <state root>/cache, for what runs may reuse (never data of a run): created 0700 and checked
// like the state root.
Expected<std::string> CacheDir();

class RunDir {
 public:
  static Expected<RunDir> Create();
  RunDir(RunDir&&) = default;
  RunDir& operator=(RunDir&&) = default;
  ~RunDir();

  const std::string& id() const { return id_; }
  const std::string& path() const { return path_; }
  std::string RootMountpoint() const { return path_ + "/root"; }

 private:
  RunDir(std::string id, std::string path) : id_(std::move(id)), path_(std::move(path)) {}
  std::string id_;
  std::string path_;
};

// The kernel's start time of a process, to tell a live runtime from a recycled pid. A zombie
// counts as gone.
Expected<unsigned long long> ProcessStartTime(int pid);
// True when the process is stopped (SIGSTOP, a tracer).
bool ProcessStopped(int pid);

// Removes run dirs and cgroups of runtimes that are gone. Safe to call concurrently.
void SweepStaleRuns();

}  // namespace smolbox::shared
