#include "rlimits.h"

#include <algorithm>

#include "mutant.h"

namespace smolbox::agent {
namespace {

void Add(RlimitPlan& plan, int resource, rlim_t soft, rlim_t hard, SetupStep step) {
  plan.entries[plan.count++] = RlimitPlan::Entry{resource, soft, hard, step};
}

rlim_t AsRlim(int64_t value) { return static_cast<rlim_t>(value); }

}  // namespace

RlimitPlan PlanRlimits(const ExecRequest& request) {
  RlimitPlan plan;
  if (request.files > 0 && SMOLBOX_PROTECTED("rlimit_files")) {
    Add(plan, RLIMIT_NOFILE, AsRlim(request.files), AsRlim(request.files),
        SetupStep::kRlimitNofile);
  }
  if (request.cpu_ms > 0 && SMOLBOX_PROTECTED("rlimit_cpu")) {
    // SIGXCPU at the soft limit, SIGKILL a second later for a workload that ignores it.
    rlim_t seconds = AsRlim((request.cpu_ms + 999) / 1000);
    Add(plan, RLIMIT_CPU, seconds, seconds + 1, SetupStep::kRlimitCpu);
  }
  if (request.memory_bytes > 0) {
    Add(plan, RLIMIT_DATA, AsRlim(request.memory_bytes), AsRlim(request.memory_bytes),
        SetupStep::kRlimitData);
  }
  if (request.nproc > 0) {
    Add(plan, RLIMIT_NPROC, AsRlim(request.nproc), AsRlim(request.nproc), SetupStep::kRlimitNproc);
  }
  if (request.fsize_bytes > 0) {
    Add(plan, RLIMIT_FSIZE, AsRlim(request.fsize_bytes), AsRlim(request.fsize_bytes),
        SetupStep::kRlimitFsize);
  }
  // A core dump of a workload is a write nobody asked for, outside the storage quota.
  Add(plan, RLIMIT_CORE, 0, 0, SetupStep::kRlimitCore);
  return plan;
}

SetupFailure ApplyRlimits(const RlimitPlan& plan) noexcept {
  for (size_t i = 0; i < plan.count; ++i) {
    const RlimitPlan::Entry& entry = plan.entries[i];
    rlimit current{};
    if (getrlimit(entry.resource, &current) != 0) return Failed(entry.step);
    rlimit wanted{std::min(entry.soft, current.rlim_max), std::min(entry.hard, current.rlim_max)};
    if (setrlimit(entry.resource, &wanted) != 0) return Failed(entry.step);
  }
  return {};
}

}  // namespace smolbox::agent
