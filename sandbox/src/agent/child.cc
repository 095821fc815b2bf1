#include "child.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>

#include "mutant.h"
#include "privileges.h"

namespace smolbox::agent {
namespace {

[[noreturn]] void ReportAndExit(int error_fd, SetupFailure failure) noexcept {
  // Eight bytes on a pipe: one atomic write. If it fails the agent still sees exit 125.
  [[maybe_unused]] ssize_t written = write(error_fd, &failure, sizeof failure);
  _exit(kExitSetupFailed);
}

void Require(const ChildPlan& plan, SetupFailure failure) noexcept {
  if (failure) ReportAndExit(plan.error_fd, failure);
}

SetupFailure ResetSignals() noexcept {
  sigset_t none;
  sigemptyset(&none);
  // The agent blocks SIGCHLD for its signalfd; a blocked mask survives execve.
  if (sigprocmask(SIG_SETMASK, &none, nullptr) != 0) return Failed(SetupStep::kSignals);
  // So does an ignored signal: the agent ignores SIGPIPE, and `yes | head` must still end.
  if (signal(SIGPIPE, SIG_DFL) == SIG_ERR) return Failed(SetupStep::kSignals);
  return {};
}

SetupFailure JoinCgroup(const ChildPlan& plan) noexcept {
  // The agent holds the cgroup (in a microVM); on ns the runtime joined it, and made the
  // sandbox's cgroup namespace, before the agent started.
  if (plan.cgroup_procs_fd < 0) return {};
  int root_fd = plan.cgroup_ns_root_procs_fd >= 0 ? plan.cgroup_ns_root_procs_fd : plan.cgroup_procs_fd;
  // Before anything the workload could spend: from here on its memory and pids count.
  if (write(root_fd, "0", 1) != 1) return Failed(SetupStep::kJoinCgroup);
  // Rooted at the workload's cgroup: /proc/self/cgroup shows "/", not the guest's layout.
  if (SMOLBOX_PROTECTED("cgroupns") && unshare(CLONE_NEWCGROUP) != 0) return Failed(SetupStep::kCgroupNamespace);
  if (root_fd != plan.cgroup_procs_fd && write(plan.cgroup_procs_fd, "0", 1) != 1) return Failed(SetupStep::kJoinCgroup);
  return {};
}

SetupFailure NewSession() noexcept {
  // Its own session and process group, which is the tree KillWorkloads() ends when the agent
  // is not PID 1; and no controlling terminal to inject keystrokes into.
  if (setsid() < 0) return Failed(SetupStep::kSetsid);
  return {};
}

SetupFailure WireStdio(const ChildPlan& plan) noexcept {
  // The plan's fds are all above 2 (the agent keeps 0-2 open), so no dup2 clobbers another.
  if (dup2(plan.stdin_fd, 0) < 0 || dup2(plan.stdout_fd, 1) < 0 || dup2(plan.stderr_fd, 2) < 0) {
    return Failed(SetupStep::kStdio);
  }
  // Every other fd goes: the channel, the pipes' originals, anything a past exec left. The
  // error pipe stays until execve closes it (CLOEXEC), which is how the agent learns of it.
  if (!SMOLBOX_PROTECTED("close_fds")) return {};
  auto error_fd = static_cast<unsigned>(plan.error_fd);
  if (error_fd > 3 && close_range(3, error_fd - 1, 0) != 0) return Failed(SetupStep::kCloseRange);
  if (close_range(error_fd + 1, ~0U, 0) != 0) return Failed(SetupStep::kCloseRange);
  return {};
}

SetupFailure EnterWorkdir(const ChildPlan& plan) noexcept {
  if (plan.cwd[0] != '\0' && chdir(plan.cwd) != 0) return Failed(SetupStep::kChdir);
  return {};
}

SetupFailure LoadSeccomp(const ChildPlan& plan) noexcept {
  if (!SMOLBOX_PROTECTED("seccomp")) return {};
  if (int err = LoadSeccompProgram(*plan.seccomp); err != 0)
    return Failed(SetupStep::kSeccomp, err);
  return {};
}

void WriteText(const char* text) noexcept {
  [[maybe_unused]] ssize_t written = write(STDERR_FILENO, text, strlen(text));
}

// What a shell prints, on the workload's own stderr, so the user sees it where they look.
[[noreturn]] void ReportExecFailure(const ChildPlan& plan, int err) noexcept {
  const char* reason = strerrordesc_np(err);
  if (err == ENOENT && plan.searched_path) reason = "command not found";
  WriteText("smolbox: ");
  WriteText(plan.argv0);
  WriteText(": ");
  WriteText(reason != nullptr ? reason : "cannot execute");
  WriteText("\n");
  _exit(err == ENOENT ? kExitNotFound : kExitCannotExecute);
}

// As execvp: a candidate that is missing or unreadable moves on to the next; EACCES wins
// over ENOENT at the end, so a file that exists but is not executable says so.
[[noreturn]] void Exec(const ChildPlan& plan) noexcept {
  int err = ENOENT;
  bool saw_eacces = false;
  for (const char* const* path = plan.candidates; *path != nullptr; ++path) {
    execve(*path, plan.argv, plan.envp);
    err = errno;
    if (err == EACCES) {
      saw_eacces = true;
    } else if (err != ENOENT && err != ENOTDIR) {
      ReportExecFailure(plan, err);
    }
  }
  ReportExecFailure(plan, saw_eacces ? EACCES : err);
}

}  // namespace

void RunChild(const ChildPlan& plan) noexcept {
  Require(plan, ResetSignals());
  Require(plan, JoinCgroup(plan));
  Require(plan, NewSession());
  Require(plan, WireStdio(plan));
  Require(plan, EnterWorkdir(plan));
  Require(plan, ApplyRlimits(plan.rlimits));
  Require(plan, DropPrivileges(plan.uid, plan.gid));
  // Last: every step above may use syscalls the policy denies (nsjail: "should be the last
  // one in the sequence").
  Require(plan, LoadSeccomp(plan));
  Exec(plan);
}

}  // namespace smolbox::agent
