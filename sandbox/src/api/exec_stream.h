// An exec into a persistent sandbox, streamed to an API client as NDJSON while it runs:
//
//   {"type":"stdout","data":"..."}      as the workload writes it (UTF-8; invalid bytes become
//   {"type":"stderr","data":"..."}       U+FFFD, a sequence split across reads is kept whole)
//   {"type":"result","result":{...}}    last: the RunResult, as run's JSON, output not in it
//
// A client that goes away (a write fails, or the connection is found closed) cancels the exec:
// the keeper ends the workload. So does cancel_fd, the server's own shutdown.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "exec_request.h"
#include "smolbox/result.h"
#include "unique_fd.h"

namespace smolbox::api {

struct ExecClient {
  // Writes one line; false when the client is gone.
  std::function<bool(std::string_view line)> write_line;
  // Whether the client is still there, asked between writes.
  std::function<bool()> connected;
};

// Returns the exec's result; when the client went away it is the cancelled exec's.
RunResult StreamExec(const std::string& sandbox, const ExecRequest& request, const ExecClient& client, int cancel_fd);

// bytes in a memory file, at offset 0: an exec's stdin, which the keeper reads to its end.
Expected<UniqueFd> MemoryFile(const std::string& bytes);

// The longest prefix of pending that ends on a whole UTF-8 sequence; what is left (at most the
// 3 bytes of a sequence begun but not finished) stays in pending for the next read.
std::string TakeWholeUtf8(std::string& pending);

}  // namespace smolbox::api
