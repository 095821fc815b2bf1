#include "agent_session.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include <fmt/format.h>

#include "exec_protocol.h"
#include "mutant.h"
#include "trust_store.h"

namespace smolbox::shared {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
// How long an exec that lost its agent waits for the sandbox process to be reapable, so that
// its error can say what ended it (QEMU killed, say) rather than only that the agent went quiet.
constexpr int kDeathSettleMs = 1000;

int64_t MsSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

// Counters of the sandbox's cgroup before an exec, so that each exec is judged on its own.
struct CgroupMarks {
  int64_t oom_kills = 0;
  int64_t pids_max_events = 0;
  int64_t cpu_ms = 0;
};

CgroupMarks Mark(const Cgroup* cg) {
  if (cg == nullptr) return {};
  return {cg->OomKills(), cg->PidsMaxEvents(), cg->CpuUsageMs().value_or(0)};
}

// What only the host sees in the cgroup that holds the workload.
void JudgeByCgroup(const MonitorOutcome& outcome, const Cgroup& cg, const CgroupMarks& before, bool first_exec,
                   RunResult& result) {
  bool oom = cg.OomKills() > before.oom_kills;
  // An OOM kill shows as the agent's SIGKILL, or as a dead agent.
  bool killed = outcome.report ? result.status == Status::kSignaled && result.signal == SIGKILL
                               : result.status == Status::kInternalError;
  if (oom && killed) {
    result.status = Status::kMemoryLimit;
    result.signal = SIGKILL;
    result.error.clear();
  }
  if (auto cpu = cg.CpuUsageMs()) result.usage.cpu_ms = std::max(result.usage.cpu_ms, *cpu - before.cpu_ms);
  // The cgroup's peak spans the sandbox's life; it is this exec's own only for the first.
  if (first_exec) result.usage.peak_memory_bytes = std::max(result.usage.peak_memory_bytes, cg.PeakMemoryBytes());
  if (cg.PidsMaxEvents() > before.pids_max_events) result.limits_hit.push_back("pids");
}

void TakeOutput(MonitorOutcome& outcome, RunResult& result) {
  for (auto& warning : outcome.warnings) result.Warn(std::move(warning));
  result.stdout_data = std::move(outcome.stdout_data);
  result.stderr_data = std::move(outcome.stderr_data);
  result.stdout_truncated = outcome.stdout_truncated || (outcome.report && outcome.report->stdout_truncated);
  result.stderr_truncated = outcome.stderr_truncated || (outcome.report && outcome.report->stderr_truncated);
}

// Waits up to timeout_ms for the process behind pidfd to end; returns at once when it has.
void WaitForExit(int pidfd, int timeout_ms) {
  pollfd fd{pidfd, POLLIN, 0};
  while (poll(&fd, 1, timeout_ms) < 0 && errno == EINTR) {
  }
}

}  // namespace

RunResult AgentSession::Exec(const ExecSpec& spec, const ExecIo& io, int cancel_fd) {
  const AgentSandbox& box = sandbox_;
  RunResult result;
  result.backend = box.backend;
  result.isolation = box.isolation;
  WarnWeakLimits(box.cgroup, box.storage, result);
  if (std::string dead = DeathReason(); !dead.empty()) {
    result.status = Status::kInternalError;
    result.error = "the sandbox is dead: " + dead;
    return result;
  }
  auto run_start = Clock::now();
  ExecRequest request = MakeExecRequest(spec, box, io);
  CgroupMarks before = Mark(box.cgroup);
  MonitorOutcome outcome;
  if (auto sent = channel::WriteMessage(box.channel, EncodeExec(request)); !sent) {
    outcome.error = sent.error().ToString();
  } else {
    outcome = MonitorExec(box.channel, box.pidfd, request, io, box.cgroup, cancel_fd, box.grace_ms);
  }
  result.timings.run_ms = MsSince(run_start);
  auto teardown_start = Clock::now();
  bool first_exec = ++execs_ == 1;
  ApplyOutcome(outcome, box.backstop_warning, result);
  // The agent's silence is the symptom; what ended the sandbox under it is the cause. The
  // channel can close a moment before the sandbox's process is reapable, so give it that moment.
  if (result.status == Status::kInternalError) WaitForExit(box.pidfd, kDeathSettleMs);
  if (std::string dead = DeathReason(); !dead.empty() && result.status == Status::kInternalError) {
    result.error = fmt::format("the sandbox died during the exec: {} ({})", dead, result.error);
  }
  if (box.cgroup) JudgeByCgroup(outcome, *box.cgroup, before, first_exec, result);
  TakeOutput(outcome, result);
  if (box.gateway) {
    result.egress = box.gateway->TakeLog();
    if (box.gateway->TakeLimitHit()) result.limits_hit.push_back("net");
  }
  if (box.storage && box.storage->Full()) result.limits_hit.push_back("storage");
  if (box.storage) CopyBackVolumes(*box.spec, *box.volumes, *box.storage, result);
  result.timings.teardown_ms = MsSince(teardown_start);
  return result;
}

std::string AgentSession::DeathReason() const {
  pollfd fd{sandbox_.pidfd, POLLIN, 0};
  if (poll(&fd, 1, 0) <= 0) return "";
  // How it ended, when it was ours to wait for; WNOWAIT leaves it to be reaped as before.
  siginfo_t info{};
  constexpr idtype_t kByPidfd = static_cast<idtype_t>(3);  // P_PIDFD, which glibc 2.36 does not name
  if (waitid(kByPidfd, static_cast<id_t>(sandbox_.pidfd), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid != 0) {
    if (info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED) {
      return fmt::format("{}, killed by signal {} (SIG{})", sandbox_.death_reason, info.si_status, sigabbrev_np(info.si_status));
    }
    if (info.si_code == CLD_EXITED && info.si_status != 0) {
      return fmt::format("{}, with status {}", sandbox_.death_reason, info.si_status);
    }
  }
  return sandbox_.death_reason;
}

ExecRequest MakeExecRequest(const ExecSpec& spec, const AgentSandbox& sandbox, const ExecIo& io) {
  ExecRequest r;
  const std::string& workdir = spec.workdir ? *spec.workdir : sandbox.spec->workdir;
  r.argv = spec.argv;
  r.env = {{"PATH", kDefaultPath}, {"HOME", workdir}, {"LANG", "C.UTF-8"}};
  if (!sandbox.spec->ca_bundle.empty()) {
    for (const char* name : kCaBundleVariables) r.env[name] = kSandboxCaBundle;
  }
  for (const auto& [k, v] : spec.env) r.env[k] = v;
  if (!SMOLBOX_PROTECTED("env_scrub")) {
    for (char** entry = environ; *entry != nullptr; ++entry) {
      std::string_view text(*entry);
      size_t equals = text.find('=');
      if (equals != std::string_view::npos) r.env.emplace(text.substr(0, equals), text.substr(equals + 1));
    }
  }
  r.cwd = workdir;
  r.uid = sandbox.uid;
  r.gid = sandbox.gid;
  r.timeout_ms = spec.limits.timeout_ms;
  r.cpu_ms = spec.limits.cpu_ms.value_or(0);
  r.output_bytes = spec.limits.output_bytes;
  r.files = spec.limits.files;
  // Weaker stand-ins where the cgroup cannot hold the limit; the result warns about each.
  const SandboxLimits& held = sandbox.spec->limits;
  bool memory_unheld = sandbox.cgroup ? !sandbox.cgroup->holds_memory() : sandbox.stand_ins_without_cgroup;
  bool pids_unheld = sandbox.cgroup ? !sandbox.cgroup->holds_pids() : sandbox.stand_ins_without_cgroup;
  if (memory_unheld) r.memory_bytes = held.memory_mib << 20;
  if (pids_unheld) r.nproc = held.pids;
  r.stdin_stream = io.has_stdin();
  return r;
}

void WarnWeakLimits(const Cgroup* cgroup, const Storage* storage, RunResult& result) {
  if (cgroup) {
    for (const auto& problem : cgroup->problems()) result.Warn("cgroup: " + problem);
    if (!cgroup->holds_memory()) result.Warn("memory: no cgroup; enforced per process by RLIMIT_DATA only");
    if (!cgroup->holds_pids()) result.Warn("pids: no cgroup; enforced per user by RLIMIT_NPROC only");
    if (!cgroup->holds_cpu()) result.Warn("cpus: no cgroup; the CPU share is not limited");
  }
  if (storage && !storage->disk_backed()) {
    result.Warn("storage: a size-capped tmpfs (disk-backed storage needs root); it uses RAM");
  }
}

RunResult SetupFailure(RunResult result, const Error& error) {
  result.status = Status::kSetupError;
  result.error = error.ToString();
  return result;
}

void StopAgent(int channel, int pidfd, pid_t pid, int wait_ms) {
  shutdown(channel, SHUT_RDWR);
  pollfd fd{pidfd, POLLIN, 0};
  if (poll(&fd, 1, wait_ms) <= 0) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
  KillAndReap(-1, pid);
}

void KillAndReap(int pidfd, pid_t pid) {
  if (pidfd >= 0) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
  if (pid > 0) {
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

}  // namespace smolbox::shared
