// `smolbox mcp`: the Model Context Protocol over stdio, so that an AI agent's client uses the
// sandbox directly. JSON-RPC 2.0, one message per line: initialize, ping, tools/list and
// tools/call; notifications get no reply.
//
// Tools: run_code, create_sandbox, exec, write_file, read_file, remove_sandbox. run_code and
// create_sandbox take the RunSpec's fields by name, as POST /v1/run and POST /v1/sandboxes do,
// and each runs through the same launcher, parser and validator as the HTTP API (launch.h), so
// every field and limit holds as it does there. The defaults are strict: no network, 30 s.
//
// A tool that fails (bad arguments, a limit hit, a sandbox that is gone) is a tool result with
// isError and a text naming the field or the limit; only a message that is not JSON-RPC, an
// unknown method or an unknown tool is a JSON-RPC error. The sandboxes a session creates are
// tied to it by a lifeline, as the API server's are, and removed when its stdin ends.
#pragma once

#include <string>

namespace smolbox::api {

struct McpOptions {
  std::string smolbox_exe;  // the binary children run
  std::string backend;      // every sandbox's: "ns", "vm", or empty for smolbox's choice (auto)
  int max_sandboxes = 8;    // at once, in one session
  std::string volume_root;  // where volumes' sources are, as serve --volume-root's; empty: none
  bool allow_egress = false;  // whether a call may give its sandbox an egress policy
};

// Serves stdin to stdout until stdin ends; returns the exit code.
int ServeMcp(const McpOptions& options);

}  // namespace smolbox::api
