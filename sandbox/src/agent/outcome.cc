#include "outcome.h"

#include <sys/wait.h>

#include <algorithm>
#include <csignal>

namespace smolbox::agent {
namespace {

int64_t Millis(const timeval& tv) { return tv.tv_sec * 1000 + tv.tv_usec / 1000; }

int64_t CpuMs(const rusage& usage) { return Millis(usage.ru_utime) + Millis(usage.ru_stime); }

// How the main process ended, when the agent did not end it.
void JudgeWaitStatus(const Ending& ending, const ExecRequest& request, ExecReport& report) {
  if (WIFEXITED(ending.wait_status)) {
    report.status = Status::kExited;
    report.exit_code = WEXITSTATUS(ending.wait_status);
    return;
  }
  report.signal = WIFSIGNALED(ending.wait_status) ? WTERMSIG(ending.wait_status) : 0;
  // RLIMIT_CPU sends SIGXCPU at the soft limit and SIGKILL at the hard one, a second later.
  bool over_cpu = request.cpu_ms > 0 && CpuMs(ending.main_usage) >= request.cpu_ms;
  if (report.signal == SIGSYS) {
    report.status = Status::kViolation;  // the policy's KILL_PROCESS
  } else if (report.signal == SIGXCPU || (report.signal == SIGKILL && over_cpu)) {
    report.status = Status::kCpuLimit;
  } else {
    report.status = Status::kSignaled;
  }
}

void FillUsage(const Ending& ending, ExecReport& report) {
  report.wall_ms = ending.wall.count();
  // RUSAGE_CHILDREN already holds the main process (the agent reaped it), and with it every
  // process the agent reaped as PID 1 or subreaper: adding wait4's figure would count it twice.
  report.cpu_ms = std::max(CpuMs(ending.main_usage),
                           CpuMs(ending.children_after) - CpuMs(ending.children_before));
  // ru_maxrss of RUSAGE_CHILDREN is the largest child ever, not a sum: it only speaks for this
  // exec when it grew during it.
  int64_t peak_kib = ending.main_usage.ru_maxrss;
  if (ending.children_after.ru_maxrss > ending.children_before.ru_maxrss) {
    peak_kib = std::max(peak_kib, ending.children_after.ru_maxrss);
  }
  report.peak_memory_bytes = peak_kib * 1024;
}

}  // namespace

ExecReport Judge(const Ending& ending, const ExecRequest& request) {
  ExecReport report;
  report.stdout_truncated = ending.stdout_truncated;
  report.stderr_truncated = ending.stderr_truncated;
  FillUsage(ending, report);
  JudgeWaitStatus(ending, request, report);
  bool truncated = ending.stdout_truncated || ending.stderr_truncated;
  if (ending.kill_reason == KillReason::kTimeout) {
    report.status = Status::kTimeout;
    report.exit_code = -1;
  } else if (ending.kill_reason == KillReason::kCpuLimit) {
    report.status = Status::kCpuLimit;
    report.exit_code = -1;
  } else if (ending.kill_reason == KillReason::kOutputLimit || truncated) {
    // Also when the excess only showed up while draining, after the main process had exited.
    report.status = Status::kOutputLimit;
    report.exit_code = -1;
  } else if (ending.kill_reason == KillReason::kHostGone) {
    report.status = Status::kInternalError;
    report.error = "the host closed the channel during the exec";
  } else if (ending.kill_reason == KillReason::kCancelled) {
    // Judged by its wait status (SIGKILL, unless it ended first); the error says who ended it.
    report.error = "cancelled by the host (its caller went away, or the sandbox's CPU time ran out)";
  }
  return report;
}

}  // namespace smolbox::agent
