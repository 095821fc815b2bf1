// The server runs each one-shot run and each create in a child `smolbox` process, not in its
// own: a backend clones and forks, which a process with many threads must not do before an
// exec, and a crash there costs one request, not the server.
//
// The child is killed (PR_SET_PDEATHSIG) when the server's thread that started it dies, so a
// SIGKILL of the server leaves no run going; its sandbox goes with it, and the run directory
// is swept at the next start.
#pragma once

#include <string>
#include <vector>

#include "smolbox/error.h"

namespace smolbox::api {

struct ChildOutput {
  int exit_code = -1;  // 128+N when killed by signal N
  std::string stdout_data;
};

// Runs exe with args, input on its stdin and its stderr to /dev/null; returns its stdout, up to
// max_stdout bytes (more is an error). keep_fd, unless -1, is passed to the child as fd 3.
// cancel_fd, unless -1, kills the child with SIGKILL once it is readable.
Expected<ChildOutput> RunChild(const std::string& exe, const std::vector<std::string>& args, const std::string& input,
                               size_t max_stdout, int keep_fd = -1, int cancel_fd = -1);

}  // namespace smolbox::api
