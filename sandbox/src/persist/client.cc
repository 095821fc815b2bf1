#include "client.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include <fmt/format.h>

#include "fd_passing.h"
#include "sandbox_state.h"
#include "state.h"
#include "workspace.h"

namespace smolbox::persist {
namespace {

// A stop tears the sandbox down: an agent's, or a VM's power-off.
constexpr int kStopTimeoutSec = 60;
constexpr int kKeeperExitWaitMs = 10000;
// Past an exec's timeout the agent ends the workload and the keeper answers at once; the host's
// backstop ends a guest that does not, at most 10 s later (a vm under TCG). A keeper still silent
// this long after the timeout is stopped or hung, and the client stops waiting for it.
constexpr int64_t kAnswerMarginMs = 20000;

using Clock = std::chrono::steady_clock;

Expected<UniqueFd> Connect(int dir_fd) {
  SMOLBOX_ASSIGN_OR_RETURN(auto control, NewControlSocket(dir_fd));
  if (connect(control.fd.get(), reinterpret_cast<sockaddr*>(&control.address), sizeof control.address) != 0) {
    return std::unexpected(Error::Sys("connect to the sandbox's keeper"));
  }
  return std::move(control.fd);
}

RunResult Refused(std::string error) {
  RunResult result;
  result.status = Status::kSetupError;
  result.error = std::move(error);
  return result;
}

std::string Dead(const std::string& name, const std::string& reason) {
  return fmt::format("sandbox {:?} is dead: {}; smolbox rm {} removes it", name, reason, name);
}

// Waits for the keeper to exit, killing it if it does not within the wait.
void AwaitKeeperExit(const KeeperInfo& info, int dir_fd, bool kill_now) {
  UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, info.pid, 0)));
  // The pid may have been recycled between the check and the open: check again through it.
  if (!pidfd.valid() || !KeeperAlive(info, dir_fd)) return;
  if (kill_now) syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
  pollfd fd{pidfd.get(), POLLIN, 0};
  if (poll(&fd, 1, kKeeperExitWaitMs) > 0) return;
  syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
  poll(&fd, 1, kKeeperExitWaitMs);
}

// Asks the keeper to tear its sandbox down; false when it could not be asked or did not answer.
bool AskToStop(int dir_fd) {
  auto conn = Connect(dir_fd);
  if (!conn) return false;
  timeval timeout{kStopTimeoutSec, 0};
  setsockopt(conn->get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  if (!channel::WriteMessage(conn->get(), {{{"type", "stop"}}, ""})) return false;
  auto reply = channel::ReadMessage(conn->get());
  return reply && *reply && (*reply)->Type() == "stopped";
}

// Waits until the keeper's answer is there to read, or the deadline passes (false). A cancel,
// or the deadline, shuts our sending side: the keeper reads that as the client gone and ends the
// workload, then still answers.
bool AwaitAnswer(int conn_fd, int cancel_fd, std::optional<Clock::time_point> deadline) {
  for (;;) {
    int wait_ms = -1;
    if (deadline) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now()).count();
      if (left <= 0) {
        shutdown(conn_fd, SHUT_WR);
        return false;
      }
      wait_ms = static_cast<int>(std::min<int64_t>(left, 60000));
    }
    pollfd fds[2] = {{conn_fd, POLLIN, 0}, {cancel_fd, POLLIN, 0}};
    if (poll(fds, 2, wait_ms) < 0) {
      if (errno == EINTR) continue;
      return true;
    }
    if (fds[0].revents != 0) return true;
    if (fds[1].revents != 0) {
      shutdown(conn_fd, SHUT_WR);
      cancel_fd = -1;
    }
  }
}

RunResult NoAnswer(const std::string& name, const KeeperInfo& keeper, int64_t timeout_ms) {
  RunResult broken;
  broken.status = Status::kInternalError;
  broken.error = fmt::format("sandbox {:?}: its keeper (pid {}) gave no result within {} ms of the exec's {} ms timeout",
                             name, keeper.pid, kAnswerMarginMs, timeout_ms);
  if (shared::ProcessStopped(keeper.pid)) {
    broken.error += fmt::format("; it is stopped (SIGSTOP): SIGCONT resumes it, smolbox rm --force {} ends it", name);
  }
  return broken;
}

}  // namespace

Expected<UniqueFd> OpenStdinFile(const std::string& path) { return shared::OpenStdinFile(path); }

RunResult ExecInSandbox(const std::string& name, const ExecOrder& order, const ExecIo& io, int cancel_fd) {
  auto dir = OpenSandboxDir(name);
  if (!dir) return Refused(dir.error().ToString());
  auto lock = TryLockPastForks(dir->get());
  if (!lock) return Refused(lock.error().ToString());
  if (!lock->valid()) {
    return Refused(fmt::format("sandbox {:?} is busy: another exec is running in it (execs into one sandbox "
                               "run one at a time; try again when it ends)", name));
  }
  auto listing = Inspect(name, dir->get());
  if (!listing.info) return Refused(Dead(name, listing.reason));
  if (auto reason = ReadDeathReason(dir->get())) return Refused(Dead(name, *reason));
  if (!KeeperAlive(*listing.info, dir->get())) return Refused(Dead(name, "its keeper process is gone"));
  auto conn = Connect(dir->get());
  if (!conn) return Refused(Dead(name, conn.error().ToString()));
  std::vector<int> fds;
  if (order.sends_stdin) fds.push_back(io.stdin_fd);
  if (order.streams_output) fds.insert(fds.end(), {io.stdout_fd, io.stderr_fd});
  if (auto sent = shared::SendWithFds(conn->get(), EncodeExecOrder(order), fds); !sent) {
    return Refused(Dead(name, sent.error().ToString()));
  }
  // How long a result may take: the exec's timeout, or the sandbox's, and the margin past it.
  int64_t timeout_ms = order.timeout_ms.value_or(listing.info->exec_timeout_ms);
  std::optional<Clock::time_point> deadline;
  if (timeout_ms > 0) deadline = Clock::now() + std::chrono::milliseconds(timeout_ms + kAnswerMarginMs);
  if (!AwaitAnswer(conn->get(), cancel_fd, deadline)) return NoAnswer(name, *listing.info, timeout_ms);
  if (deadline) {
    // An answer begun is finished promptly; a keeper stopped in the middle of one is not waited for.
    timeval bound{kAnswerMarginMs / 1000, 0};
    setsockopt(conn->get(), SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
  }
  auto result = ReceiveResult(conn->get());
  if (!result) {
    RunResult broken;
    broken.status = Status::kInternalError;
    broken.error = fmt::format("sandbox {:?}: {}", name, result.error().ToString());
    // A keeper that died of its sandbox's end wrote why before it closed the connection.
    if (auto reason = ReadDeathReason(dir->get())) broken.error += fmt::format("; it is dead: {}", *reason);
    return broken;
  }
  return *result;
}

Expected<void> RemoveSandbox(const std::string& name, bool force) {
  SMOLBOX_ASSIGN_OR_RETURN(auto dir, OpenSandboxDir(name));
  SMOLBOX_ASSIGN_OR_RETURN(auto lock, TryLock(dir.get()));
  bool busy = !lock.valid();
  auto info = ReadInfo(dir.get());
  if (busy && !info) {
    return std::unexpected(Error{"name", fmt::format("sandbox {:?} is still starting; try again when it is up", name), 0});
  }
  if (busy && !force) {
    return std::unexpected(Error{"name", fmt::format("sandbox {:?} is busy: an exec is running in it; smolbox rm --force {} "
                                                     "ends it", name, name), 0});
  }
  if (info && KeeperAlive(*info, dir.get())) {
    // A busy keeper is mid-exec and cannot answer; an idle one tears down in order; one that
    // has marked its sandbox dead is tearing down already and exits by itself.
    bool dying = ReadDeathReason(dir.get()).has_value();
    bool stopped = !busy && !dying && AskToStop(dir.get());
    AwaitKeeperExit(*info, dir.get(), !stopped && !dying);
  }
  // Whatever a killed keeper left: its run directory, its cgroups.
  shared::SweepStaleRuns();
  return RemoveSandboxDir(name);
}

}  // namespace smolbox::persist
