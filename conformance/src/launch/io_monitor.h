// The poll loop of one launch: it feeds stdin, captures stdout and stderr up to a cap (reading
// and dropping the rest, so that the launched process never blocks on a full pipe), kills the
// tree at the bound and notices the main process's exit. It recomputes its deadline on every
// pass, and it never reaps: the main process stays a zombie, so that its pid, which names the
// launched group and session, is not recycled while the net may still signal it.
//
//   IoMonitor monitor(child.pid, std::move(pidfd), child.start, launch, obs, [&] { KillTree(); });
//   monitor.Run(std::move(child.stdin_writer), std::move(child.stdout_reader),
//               std::move(child.stderr_reader));   // obs has the exit, output and wall time
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "launch/launcher.h"
#include "unique_fd.h"

namespace smolvm_check {

class IoMonitor {
 public:
  // kill_tree kills the launched tree at kill_after_ms; without a pidfd (old kernels) the exit is
  // noticed by polling waitid.
  IoMonitor(pid_t pid, smolbox::UniqueFd pidfd, std::chrono::steady_clock::time_point start,
            const Launch& launch, Observation& obs, std::function<void()> kill_tree);
  // Returns once the main process has exited and its output is read.
  void Run(smolbox::UniqueFd stdin_fd, smolbox::UniqueFd stdout_fd, smolbox::UniqueFd stderr_fd);

 private:
  // One output stream of the launch: captured up to a cap, the rest read and dropped.
  struct Capture {
    smolbox::UniqueFd fd;
    std::string* data;
    int64_t* total;
    size_t cap;
    // False once the stream is at EOF or broken.
    bool ReadOnce();
  };

  void PollOnce();
  void FeedStdin();
  bool TryObserveExit();
  void DrainAfterExit();

  pid_t pid_;
  smolbox::UniqueFd pidfd_;
  std::chrono::steady_clock::time_point start_, deadline_;
  const Launch& launch_;
  Observation& obs_;
  std::function<void()> kill_tree_;
  smolbox::UniqueFd stdin_;
  size_t stdin_done_ = 0;
  Capture out_[2];
  bool exited_ = false;
};

}  // namespace smolvm_check
