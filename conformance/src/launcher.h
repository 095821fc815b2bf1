// Runs one rendered sandbox command on the host inside a safety net: its own process group
// and, as root, its own cgroup, with rlimits, killed at a hard bound. The net is what makes the
// null sandbox safe to run: no payload outlives its bound or takes the host with it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "catalog.h"

namespace smolvm_check {

struct Launch {
  std::vector<std::string> argv;
  std::vector<std::string> env;      // the complete environment of the launched command
  std::vector<int> inherited_fds;    // kept open across exec at the same numbers
  std::string stdin_data;
  std::string cwd;
  int64_t kill_after_ms = 0;         // the hard bound
  size_t capture_bytes = 0;          // per stream; more is read and dropped
};

struct Observation {
  int exit_code = -1;     // -1 when killed by a signal
  int signal = 0;
  bool killed_by_net = false;
  int64_t wall_ms = 0;
  std::string stdout_data;
  std::string stderr_data;
  std::string error;      // the launch itself failed
};

Observation LaunchInSafetyNet(const Launch& launch);

}  // namespace smolvm_check
