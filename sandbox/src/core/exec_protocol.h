// The "exec" request the host sends the agent, and the "exit" report it gets back. While an
// exec runs, the host may send one "cancel": its caller went away, so the workload is ended.
// Both backends speak it; the agent applies these limits just before execve.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "channel.h"
#include "smolbox/result.h"

namespace smolbox {

struct ExecRequest {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // the complete environment; nothing else leaks in
  std::string cwd;
  uint32_t uid = 0;  // inside the sandbox
  uint32_t gid = 0;
  int64_t timeout_ms = 0;     // wall clock, enforced by the agent
  int64_t cpu_ms = 0;         // 0: none; RLIMIT_CPU per process
  int64_t output_bytes = 0;   // cap per stream
  int64_t files = 0;          // RLIMIT_NOFILE
  // 0: none. RLIMIT_DATA, only when no cgroup holds memory: it bounds what a process can
  // write to, unlike RLIMIT_AS, which V8's large address-space reservations exceed at start.
  int64_t memory_bytes = 0;
  int64_t nproc = 0;          // 0: none; RLIMIT_NPROC, only when no cgroup holds pids
  int64_t fsize_bytes = 0;    // 0: none; RLIMIT_FSIZE
  std::string stdin_data;
};

// What the agent saw of the workload. The host may override `status` with what
// only it can see (an OOM kill in the cgroup, a cgroup CPU overrun).
struct ExecReport {
  Status status = Status::kInternalError;
  int exit_code = -1;
  int signal = 0;
  int64_t wall_ms = 0;
  int64_t cpu_ms = 0;
  int64_t peak_memory_bytes = 0;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  std::string error;
  // "pids", ...: limits the agent saw hit, when it holds the cgroup (in a microVM).
  std::vector<std::string> limits_hit;
};

channel::Message EncodeExec(const ExecRequest& request);
Expected<ExecRequest> DecodeExec(const channel::Message& message);
channel::Message EncodeExit(const ExecReport& report);
Expected<ExecReport> DecodeExit(const channel::Message& message);
channel::Message EncodeCancel();
bool IsCancel(const channel::Message& message);
Expected<Status> ParseStatus(const std::string& name);

}  // namespace smolbox
