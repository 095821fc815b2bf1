// The body of POST /v1/sandboxes/{id}/exec, checked before the sandbox is asked: every error
// names the field at fault.
#pragma once

#include <optional>
#include <string>

#include "control_protocol.h"
#include "smolbox/error.h"

namespace smolbox::api {

// POST /v1/sandboxes/{id}/exec:
//   {"argv": [...], "env": {...}, "workdir": "...", "timeout_ms": N, "stdin": "..."}
// argv is required; the rest default to the sandbox's.
struct ExecRequest {
  persist::ExecOrder order;
  std::optional<std::string> stdin_data;
};
Expected<ExecRequest> ParseExecRequest(const std::string& body);

}  // namespace smolbox::api
