// `smolbox exec` and `smolbox rm`: the client side of a persistent sandbox.
#pragma once

#include <string>

#include "control_protocol.h"
#include "smolbox/backend.h"
#include "smolbox/error.h"
#include "smolbox/result.h"
#include "unique_fd.h"

namespace smolbox::persist {

// Runs one command in the sandbox `name`. A busy, dead or unknown sandbox is a setup_error
// result that says which, and what to do about it. io's fds go to the keeper as the order's
// sends_stdin and streams_output say (its stdin_data is not used). cancel_fd, unless -1, is
// watched during the exec: once it is readable or hung up, the workload is ended, as when the
// client goes away, and the result says how it ended.
RunResult ExecInSandbox(const std::string& name, const ExecOrder& order, const ExecIo& io, int cancel_fd = -1);

// An exec's --stdin file, opened as run opens one, for streaming.
Expected<UniqueFd> OpenStdinFile(const std::string& path);

// Stops the sandbox (when it runs) and removes it, leaving no process, mount, cgroup, state
// directory or QEMU. A busy sandbox is refused unless force, which kills its keeper mid-exec.
Expected<void> RemoveSandbox(const std::string& name, bool force);

}  // namespace smolbox::persist
