// The seccomp-bpf policy every workload runs under.
//
// The agent compiles it once, before it forks anything, and each child loads the compiled
// program as its very last step before execve, so the child needs no allocation to do it:
//
//   auto program = CompileSeccompPolicy();          // agent, at start
//   if (!program) { ...program.error()... }
//   if (int err = LoadSeccompProgram(*program)) ... // child, after no_new_privs
#pragma once

#include <linux/filter.h>

#include <vector>

#include "smolbox/error.h"

namespace smolbox::agent {

struct SeccompProgram {
  std::vector<sock_filter> instructions;
};

Expected<SeccompProgram> CompileSeccompPolicy();

// Async-signal-safe: returns 0 or errno. The caller must have set no_new_privs.
int LoadSeccompProgram(const SeccompProgram& program) noexcept;

// Compiles the policy and loads it into the calling process (no_new_privs included).
Expected<void> InstallSeccompPolicy();

}  // namespace smolbox::agent
