// Where `smolbox oci` keeps its containers: one directory per container under the runtime's
// --root, holding state.json (written whole and renamed into place, so a reader never sees half
// of one), start.fifo, through which `start` releases the created container, and attach.sock,
// where `exec` reaches the running sandbox.
//
//   ContainerDir dir = ContainerDir::At("/run/smolbox-oci", "web1");
//   auto state = dir.Read();         // what the monitor last wrote
//   ContainerStatus now = Observe(*state);  // stopped once its monitor is gone, whatever it wrote
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "smolbox/error.h"

namespace smolbox::oci {

// The runtime spec's statuses, and "creating" until create has finished.
enum class ContainerStatus { kCreating, kCreated, kRunning, kStopped };
std::string ToString(ContainerStatus status);

struct ContainerState {
  std::string id;
  std::string bundle;
  ContainerStatus status = ContainerStatus::kCreating;
  pid_t pid = 0;  // the container's monitor: what the engine waits for
  uint64_t pid_start =
      0;                // its start time (/proc/PID/stat), so a recycled pid is never taken for it
  std::string created;  // RFC 3339, UTC
  std::map<std::string, std::string> annotations;
  std::optional<int> exit_code;  // once stopped
};

// The runtime's --root: /run/smolbox-oci for root, $XDG_RUNTIME_DIR/smolbox-oci otherwise.
std::string DefaultRoot();

class ContainerDir {
 public:
  static ContainerDir At(const std::string& root, const std::string& id) {
    return ContainerDir(root, id);
  }
  const std::string& path() const { return path_; }
  std::string fifo() const { return path_ + "/start.fifo"; }
  // Where the container's sandbox takes its execs (SandboxSpec::attach_socket).
  std::string attach_socket() const { return path_ + "/attach.sock"; }

  // Makes the directory (and root, 0700), failing when the container already exists.
  Expected<void> Create() const;
  bool Exists() const;
  Expected<ContainerState> Read() const;
  Expected<void> Write(const ContainerState& state) const;
  Expected<void> Remove() const;

 private:
  ContainerDir(const std::string& root, const std::string& id)
      : root_(root), path_(root + "/" + id) {}
  std::string root_;
  std::string path_;
};

// The status as it is now: what state.json says, or stopped when its monitor has ended.
ContainerStatus Observe(const ContainerState& state);
// The state JSON of the runtime spec, as `smolbox oci state` prints it.
std::string StateJson(const ContainerState& state, ContainerStatus status);

}  // namespace smolbox::oci
