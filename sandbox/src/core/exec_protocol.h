// The "exec" request the host sends the agent, and the "exit" report it gets back. While an
// exec runs, the host may send one "cancel": its caller went away, so the workload is ended.
// Both backends speak it; the agent applies these limits just before execve.
//
// Stdin streams, under flow control, so that any size passes with bounded memory on both sides:
//   host -> agent   {"type":"stdin"}  tail = at most kStdinChunkBytes    (repeated)
//                   {"type":"stdin_end"}                                   EOF for the workload
//   agent -> host   {"type":"stdin_taken", "bytes":N}   N bytes are in the workload's pipe
//                   {"type":"stdin_closed"}             the workload closed its stdin: stop
// The host never has more than kStdinWindowBytes sent and not yet taken; an agent that is sent
// more drops the channel. Stdin frames that arrive after their exec ended are ignored.
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
  // False: the workload's stdin is empty (EOF at once). True: "stdin" frames follow the exec.
  bool stdin_stream = false;
};

inline constexpr size_t kStdinChunkBytes = 64 << 10;
inline constexpr size_t kStdinWindowBytes = 1 << 20;

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
channel::Message EncodeStdin(std::string bytes);
channel::Message EncodeStdinEnd();
channel::Message EncodeStdinTaken(size_t bytes);
channel::Message EncodeStdinClosed();
// The two stdin frames the host sends; one that outlived its exec is one of these.
bool IsStdinFrame(const channel::Message& message);
Expected<Status> ParseStatus(const std::string& name);

}  // namespace smolbox
