// A container's monitor: the process `smolbox oci create` forks, whose pid is the container's.
// It starts the sandbox, reports on the ready pipe, waits on start.fifo for `start`, runs the
// process with the engine's stdio (or a pty sent to the console socket), and exits with the
// process's status. A signal it is sent (kill) ends the process, and the monitor exits as the
// process would have: 128 + the signal.
#pragma once

#include <string>

#include "oci_config.h"
#include "oci_state.h"
#include "smolbox/result.h"

namespace smolbox::oci {

struct MonitorPlan {
  OciContainer container;
  ContainerDir dir;
  ContainerState state;        // as create wrote it, "creating"
  std::string console_socket;  // with a terminal
  int ready_fd = -1;           // create's pipe: "" when created, else the error's text
};

// Ready-pipe messages are one line; an empty one means created.
[[noreturn]] void RunMonitor(MonitorPlan plan);

// The exit status a container's process ended with, as a shell reports it: the code, or 128 + the
// signal (137 for a memory limit's kill).
int ContainerExitCode(const RunResult& result);

}  // namespace smolbox::oci
