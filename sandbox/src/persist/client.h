// `smolbox exec` and `smolbox rm`: the client side of a persistent sandbox.
#pragma once

#include <string>

#include "control_protocol.h"
#include "smolbox/error.h"
#include "smolbox/result.h"

namespace smolbox::persist {

// Runs one command in the sandbox `name`. A busy, dead or unknown sandbox is a setup_error
// result that says which, and what to do about it.
RunResult ExecInSandbox(const std::string& name, const ExecOrder& order);

// An exec's --stdin file, read as run reads one (at most 64 MiB).
Expected<std::string> ReadStdinFile(const std::string& path);

// Stops the sandbox (when it runs) and removes it, leaving no process, mount, cgroup, state
// directory or QEMU. A busy sandbox is refused unless force, which kills its keeper mid-exec.
Expected<void> RemoveSandbox(const std::string& name, bool force);

}  // namespace smolbox::persist
