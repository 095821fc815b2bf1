// The Python program a prewarmed sandbox's zygote runs (zygote.h), as `python3 -c`.
//
// It imports what scripts most often start with, then waits on fd 0, a SOCK_SEQPACKET socket
// from the agent. Each message is one exec: a JSON request (argv, env, cwd, rlimits) with four
// fds: the exec's stdin, stdout, stderr, and a status socket. For each it forks, and the fork
// forks again, so that the workload's process is orphaned to the agent, PID 1, which waits for
// it as for any workload. That grandchild waits until its parent is gone, calls setsid(), takes
// the request's stdio, closes every other fd, enters the cwd, environment and rlimits, writes
// its pid on the status socket and waits for "g": by then the agent has moved it into the
// workload cgroup. Only then does the user's code run, in a fresh __main__ module.
//
// A step that fails before "g" writes "E <what>" instead, and the agent reports a setup error.
#pragma once

#include <string_view>

namespace smolbox::agent {

extern const std::string_view kPythonZygoteProgram;

}  // namespace smolbox::agent
