// An exec's monitor: the process `smolbox oci exec` forks for a second process in a running
// container, as the container's monitor is for its first. It connects to the container's attach
// socket, where the sandbox serves it with an agent of its own, runs the process there with the
// engine's stdio (or a pty sent to the console socket), and exits with the process's status.
// Its pid is the one the engine waits for and signals; a signal that ends a container's process
// ends this one's the same way.
#pragma once

#include <string>

#include "oci_config.h"
#include "smolbox/spec.h"

namespace smolbox::oci {

struct ExecPlan {
  std::string attach_socket;  // the container's
  SandboxSpec sandbox;        // what the container was created with
  OciProcess process;
  std::string console_socket;  // with a terminal
  int ready_fd = -1;           // exec's pipe: "" once the process is about to run, else the error
};

[[noreturn]] void RunExecMonitor(ExecPlan plan);

}  // namespace smolbox::oci
