#include "guest_namespaces.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest_boot.h"
#include "guest_protocol.h"
#include "mutant.h"
#include "unique_fd.h"
#include "user.h"

namespace smolbox::agent {
namespace {

constexpr uint64_t kWorkloadNamespaces = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS;

// A mutant without the guest's user namespace runs the workload in the guest kernel's own.
uint64_t WorkloadNamespaces() {
  return SMOLBOX_PROTECTED("guest_userns") ? kWorkloadNamespaces : kWorkloadNamespaces & ~uint64_t{CLONE_NEWUSER};
}

// Only the ids matter here; the workload's own uid is chosen per exec.
confine::Identity WorkloadIdentity() { return confine::MappedIdentity(WorkloadUser::Root(), kGuestIdBase); }

// The guest's init from here on: every process of the run lives in the new pid namespace,
// whose orphans go to its own PID 1, so the serving half is the only child to wait for.
[[noreturn]] void WaitThenPowerOff(pid_t serving) {
  // Nothing of the run is left open here: the channel and every share belong to the other half.
  close_range(3, ~0U, 0);
  for (;;) {
    pid_t pid = waitpid(-1, nullptr, 0);
    if (pid == serving || (pid < 0 && errno == ECHILD)) break;
  }
  PowerOff();
}

Expected<void> AwaitIdMaps(int sync_fd) {
  char go = 0;
  ssize_t n;
  do {
    n = read(sync_fd, &go, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) return std::unexpected(Error{"workload namespaces", "the guest's init did not map our ids", 0});
  return confine::BecomeSetupRoot(WorkloadIdentity());
}

}  // namespace

Expected<void> EnterWorkloadNamespaces() {
  int sync[2];
  if (pipe2(sync, O_CLOEXEC) != 0) return std::unexpected(Error::Sys("pipe2"));
  UniqueFd sync_read(sync[0]);
  UniqueFd sync_write(sync[1]);
  // clone3 without a stack is fork() into new namespaces.
  clone_args args{};
  args.flags = WorkloadNamespaces();
  args.exit_signal = SIGCHLD;
  long pid = syscall(SYS_clone3, &args, sizeof args);
  if (pid < 0) return std::unexpected(Error::Sys("clone3 into the workload's namespaces"));
  if (pid == 0) {
    sync_write.Reset();
    return AwaitIdMaps(sync_read.get());
  }
  Expected<void> mapped = {};
  if (WorkloadNamespaces() & CLONE_NEWUSER) mapped = confine::WriteIdMaps(static_cast<pid_t>(pid), WorkloadIdentity());
  if (!mapped) {
    // The half that would have served is gone; this one answers the setup with the error.
    kill(static_cast<pid_t>(pid), SIGKILL);
    waitpid(static_cast<pid_t>(pid), nullptr, 0);
    return mapped;
  }
  if (write(sync_write.get(), "g", 1) != 1) {
    kill(static_cast<pid_t>(pid), SIGKILL);
  }
  WaitThenPowerOff(static_cast<pid_t>(pid));
}

}  // namespace smolbox::agent
