// Runs one rendered sandbox command on the host inside a safety net: its own process group
// and, as root, its own cgroup, with rlimits, killed at a hard bound. The net is what makes the
// null sandbox safe to run: no payload outlives its bound or takes the host with it.
//
//   auto net = SafetyNet::Create();              // a fresh cgroup as root
//   if (!net) return setup_error(net.error());
//   Observation obs = net->Launch(launch);       // returns once the main process has exited
//   std::vector<pid_t> left = net->Remaining();  // daemons it left behind, for the oracle
//   // ~SafetyNet kills whatever is left and removes the cgroup
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "smolbox/error.h"

namespace smolvm_check {

using smolbox::Error;
using smolbox::Expected;

struct Launch {
  std::vector<std::string> argv;
  std::vector<std::string> env;    // the complete environment of the launched command
  std::vector<int> inherited_fds;  // kept open across exec at the same numbers
  std::string stdin_data;
  std::string cwd;
  int64_t kill_after_ms = 0;  // the hard bound
  size_t capture_bytes = 0;   // per stream; more is read and dropped
  // A network namespace to launch in (a path such as /run/netns/NAME), and the file that the
  // launch then sees as /etc/resolv.conf, in a mount namespace of its own: the battery's egress
  // cases put the whole sandbox under test on the test internet's uplink. Empty: the caller's.
  std::string netns_path;
  std::string resolv_conf;
};

struct Observation {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  bool killed_by_net = false;
  int64_t wall_ms = 0;
  std::string stdout_data;
  std::string stderr_data;
  std::string error;         // the launch itself failed
  int64_t stdout_bytes = 0;  // everything written to the stream, captured or dropped
  int64_t stderr_bytes = 0;
  std::string net_warning;  // the net is weaker than intended here (no cgroup), and how
};

// The net's own limits: a backstop well above what a bounded payload uses (2 GiB, a few hundred
// processes), so that only a payload whose bounds are broken ever meets them.
struct NetLimits {
  int64_t pids = 1024;
  int64_t memory_bytes = int64_t{3} << 30;
};

// One launch and everything it starts, daemons included. As root the tree is held by a cgroup
// (v2 where it can, each v1 hierarchy otherwise), joined before exec; without one, by its
// process group and session, which a daemon can leave: warning() says so.
class SafetyNet {
 public:
  // A net that cannot get a cgroup still holds the process group: warning() says what is
  // missing. The error is for a net that cannot be set up at all.
  static Expected<SafetyNet> Create(const NetLimits& limits = {});
  explicit SafetyNet(const NetLimits& limits = {});
  ~SafetyNet();  // KillAll(), then removes the cgroup
  SafetyNet(SafetyNet&& other) noexcept;
  SafetyNet& operator=(SafetyNet&&) = delete;
  SafetyNet(const SafetyNet&) = delete;
  SafetyNet& operator=(const SafetyNet&) = delete;

  // Once per net. Returns when the main process has exited or was killed at kill_after_ms; what
  // it left running is still running.
  Observation Launch(const smolvm_check::Launch& launch);
  // Processes of the launched tree still alive; the main one, exited, is not among them.
  std::vector<pid_t> Remaining() const;
  // SIGKILLs the whole tree and waits until the cgroup is empty.
  void KillAll();
  bool has_cgroup() const;
  const std::string& warning() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Launch in a net of its own, then kill what the launch left behind. For callers that do not
// look at leftovers; the leftovers oracle needs a SafetyNet it can ask before the kill.
Observation LaunchInSafetyNet(const Launch& launch);

}  // namespace smolvm_check
