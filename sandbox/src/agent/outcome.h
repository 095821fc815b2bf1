// Judging how an exec ended, from what the agent saw: the main process's wait status, why the
// agent killed the tree (if it did), and the resource usage.
//
//   ExecReport report = Judge(ending, request);
#pragma once

#include <sys/resource.h>

#include <chrono>

#include "exec_protocol.h"

namespace smolbox::agent {

// Why the agent killed the workload tree; the first reason wins.
enum class KillReason { kNone, kTimeout, kCpuLimit, kOutputLimit, kHostGone, kCancelled };

struct Ending {
  int wait_status = 0;       // of the main process
  rusage main_usage{};       // the main process's, from wait4
  rusage children_before{};  // the agent's RUSAGE_CHILDREN before fork ...
  rusage children_after{};   // ... and after the whole tree was reaped
  std::chrono::milliseconds wall{0};
  KillReason kill_reason = KillReason::kNone;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
};

ExecReport Judge(const Ending& ending, const ExecRequest& request);

}  // namespace smolbox::agent
