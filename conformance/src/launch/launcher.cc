// The safety net: one launch and everything it starts, held by a cgroup (net_cgroup.h) or, without
// one, by its process group and session (process_tree.h); started by spawn.h and watched by
// io_monitor.h until it exits or meets its bound.
#include "launch/launcher.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "launch/io_monitor.h"
#include "launch/net_cgroup.h"
#include "launch/process_tree.h"
#include "launch/spawn.h"
#include "unique_fd.h"

namespace smolvm_check {
namespace {

Expected<void> CheckLaunch(const Launch& launch) {
  if (launch.argv.empty()) return std::unexpected(Error::Field("argv", "is empty"));
  if (launch.kill_after_ms <= 0) {
    return std::unexpected(
        Error::Field("kill_after_ms", "must be positive: the net needs a bound"));
  }
  for (int fd : launch.inherited_fds) {
    if (fd <= 2)
      return std::unexpected(Error::Field("inherited_fds", fmt::format("{} is stdio", fd)));
    if (fcntl(fd, F_GETFD) < 0)
      return std::unexpected(Error::Sys(fmt::format("inherited fd {}", fd)));
  }
  return {};
}

}  // namespace

struct SafetyNet::State {
  explicit State(const NetLimits& limits) : cgroup(limits) {}
  NetCgroup cgroup;
  std::string warning;
  pid_t leader = -1;  // the launched process, unreaped: its pid is its group's and session's id
  bool launched = false;

  void KillTree() const;
  void ReapLeader();
};

SafetyNet::SafetyNet(const NetLimits& limits) : state_(std::make_unique<State>(limits)) {
  const auto& problems = state_->cgroup.problems();
  if (!state_->cgroup.holds()) {
    state_->warning = fmt::format(
        "no cgroup ({}): the net is the process group and session alone, which a daemon can "
        "leave",
        fmt::join(problems, "; "));
  } else if (!problems.empty()) {
    state_->warning = fmt::format("cgroup without some limits: {}", fmt::join(problems, "; "));
  }
}

Expected<SafetyNet> SafetyNet::Create(const NetLimits& limits) { return SafetyNet(limits); }

SafetyNet::SafetyNet(SafetyNet&& other) noexcept = default;

SafetyNet::~SafetyNet() {
  if (!state_) return;  // moved from
  KillAll();
  state_->ReapLeader();  // before the cgroup goes
}

bool SafetyNet::has_cgroup() const { return state_->cgroup.holds(); }
const std::string& SafetyNet::warning() const { return state_->warning; }

std::vector<pid_t> SafetyNet::Remaining() const {
  if (state_->cgroup.holds()) return state_->cgroup.Procs();
  if (state_->leader <= 1) return {};
  return ScanTree(state_->leader);
}

void SafetyNet::KillAll() {
  state_->KillTree();
  if (state_->cgroup.holds()) return state_->cgroup.KillAndWait();
  if (state_->leader <= 1) return;
  for (int round = 0; round < 100; ++round) {
    auto left = ScanTree(state_->leader);
    if (left.empty()) return;
    for (pid_t pid : left) KillIfInTree(pid, state_->leader);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// The leader is unreaped until ReapLeader(), so -leader still names the launched group.
void SafetyNet::State::KillTree() const {
  cgroup.Kill();
  if (leader > 1) kill(-leader, SIGKILL);
}

void SafetyNet::State::ReapLeader() {
  if (leader <= 1) return;
  KillAndReap(leader);
  leader = -1;
}

Observation SafetyNet::Launch(const smolvm_check::Launch& launch) {
  Observation obs;
  obs.net_warning = state_->warning;
  auto fail = [&obs](const Error& e) {
    obs.error = e.ToString();
    return obs;
  };
  if (state_->launched) return fail(Error{"safety net", "launches once; make a new net", 0});
  if (auto ok = CheckLaunch(launch); !ok) return fail(ok.error());
  auto path = ResolveProgram(launch.argv[0], launch.env);
  if (!path) return fail(path.error());
  state_->launched = true;
  auto child = Spawn(launch, *path, [this](pid_t pid) { return state_->cgroup.Add(pid); });
  if (!child) return fail(child.error());
  state_->leader = child->pid;
  smolbox::UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, child->pid, 0)));
  IoMonitor monitor(child->pid, std::move(pidfd), child->start, launch, obs,
                    [this] { state_->KillTree(); });
  monitor.Run(std::move(child->stdin_writer), std::move(child->stdout_reader),
              std::move(child->stderr_reader));
  if (obs.signal != 0) obs.exit_code = -1;
  return obs;
}

Observation LaunchInSafetyNet(const Launch& launch) {
  SafetyNet net;
  return net.Launch(launch);
}

}  // namespace smolvm_check
