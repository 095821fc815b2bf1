// What `smolbox exec` and `smolbox rm` say to a sandbox's keeper over its control socket, in
// the agent channel's framing (core/channel.h).
//
//   client -> keeper  {"type":"exec", "argv":[...], "env":{...}, "workdir":..., "timeout_ms":...,
//                      "stdin":bool, "stream_output":bool}
//                     with the client's descriptors (SCM_RIGHTS): its stdin when "stdin", then
//                     its stdout and stderr when "stream_output"
//                     {"type":"stop"}
//   keeper -> client  {"type":"output", "fd":1|2}   tail = up to 8 MiB of the exec's output
//                     {"type":"result", ...}        the RunResult's JSON, stdout/stderr empty
//                     {"type":"stopped"}            after the sandbox is torn down
//
// The keeper streams stdin from the client's own descriptor and output to the client's own
// stdout and stderr, as run does; output not streamed comes back raw, outside the JSON, so
// binary output arrives byte for byte.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "channel.h"
#include "smolbox/error.h"
#include "smolbox/result.h"

namespace smolbox::persist {

// One exec's own part of the spec; the rest is the sandbox's, fixed at create.
struct ExecOrder {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // added to (and over) the sandbox's
  std::optional<std::string> workdir;
  std::optional<int64_t> timeout_ms;
  bool sends_stdin = false;     // the client's stdin descriptor comes with the order
  bool streams_output = false;  // and its stdout and stderr, where output goes as it comes
  size_t fd_count() const { return (sends_stdin ? 1 : 0) + (streams_output ? 2 : 0); }
};

channel::Message EncodeExecOrder(const ExecOrder& order);
Expected<ExecOrder> DecodeExecOrder(const channel::Message& message);

Expected<void> SendResult(int fd, const RunResult& result);
// Reads output messages until the result; EOF before it is an error.
Expected<RunResult> ReceiveResult(int fd);

}  // namespace smolbox::persist
