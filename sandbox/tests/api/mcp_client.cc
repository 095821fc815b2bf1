#include "mcp_client.h"

#include <gtest/gtest.h>

#include <chrono>

namespace smolbox::testing {

using nlohmann::json;

namespace {

std::vector<std::string> McpArgs(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"mcp", "--backend", "ns"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace

McpClient::McpClient(const std::vector<std::string>& extra, const std::vector<std::string>& env,
                     const std::vector<std::string>& prefix)
    : process_(McpArgs(extra), env, prefix) {}

json McpClient::Send(const std::string& line) {
  EXPECT_TRUE(process_.WriteStdin(line + "\n", std::chrono::seconds(10)));
  std::string out = process_.ReadStdoutUntil("\n", std::chrono::seconds(120), consumed_);
  size_t end = out.find('\n', consumed_);
  if (end == std::string::npos) return json();
  std::string reply = out.substr(consumed_, end - consumed_);
  consumed_ = end + 1;
  return json::parse(reply, nullptr, false);
}

json McpClient::Request(const std::string& method, const json& params) {
  json reply = Send(json{{"jsonrpc", "2.0"}, {"id", ++next_id_}, {"method", method}, {"params", params}}.dump());
  EXPECT_EQ(reply.value("id", -1), next_id_) << reply.dump();
  return reply;
}

json McpClient::Call(const std::string& tool, const json& arguments) {
  json reply = Request("tools/call", {{"name", tool}, {"arguments", arguments}});
  EXPECT_TRUE(reply.contains("result")) << reply.dump();
  return reply.value("result", json::object());
}

}  // namespace smolbox::testing
