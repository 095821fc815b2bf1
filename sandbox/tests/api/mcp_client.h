// A client of a real `smolbox mcp`, as an agent's client drives it: JSON-RPC lines through a
// pipe.
//
//   McpClient mcp;                                   // smolbox mcp --backend ns
//   json result = mcp.Call("run_code", {{"code", "print(1)"}});
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "smolbox_runner.h"

namespace smolbox::testing {

class McpClient {
 public:
  // extra: more flags for smolbox mcp, after --backend ns; env: more variables for it (K=V);
  // prefix: a command that execs it (LiveSmolbox's).
  explicit McpClient(const std::vector<std::string>& extra = {}, const std::vector<std::string>& env = {},
                     const std::vector<std::string>& prefix = {});

  // Sends one line and returns the reply line, parsed (null when none came in time).
  nlohmann::json Send(const std::string& line);
  nlohmann::json Request(const std::string& method, const nlohmann::json& params);
  // A tools/call's result.
  nlohmann::json Call(const std::string& tool, const nlohmann::json& arguments);

  LiveSmolbox& process() { return process_; }

 private:
  LiveSmolbox process_;
  size_t consumed_ = 0;
  int next_id_ = 0;
};

}  // namespace smolbox::testing
