// Per-exec resource limits, planned by the agent and applied by the child before execve.
//
//   RlimitPlan plan = PlanRlimits(request);            // agent, before fork
//   if (SetupFailure f = ApplyRlimits(plan)) ...        // child
#pragma once

#include <sys/resource.h>

#include <array>
#include <cstddef>

#include "exec_protocol.h"
#include "setup_failure.h"

namespace smolbox::agent {

struct RlimitPlan {
  struct Entry {
    int resource;
    rlim_t soft;
    rlim_t hard;
    SetupStep step;
  };
  std::array<Entry, 6> entries{};
  size_t count = 0;
};

// Zero or negative request fields mean "no limit from this request".
RlimitPlan PlanRlimits(const ExecRequest& request);

// Async-signal-safe. Never raises a hard limit the agent holds: asking for more than that
// gets the agent's limit, which is stricter than asked, never weaker.
SetupFailure ApplyRlimits(const RlimitPlan& plan) noexcept;

}  // namespace smolbox::agent
