// smolbox serve and smolbox mcp: the HTTP API and the MCP server (docs/api.md) from the
// command line.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace smolbox::cli {

struct ServeFlags {
  std::vector<std::string> listen;
  std::string token_file, tls_cert, tls_key;
  int max_sandboxes = 32;
  std::string max_body = "64M";
  int max_concurrent_execs = 16;
  int max_queued = 512;
  std::string drain_timeout = "30s";
  std::string max_queue_wait = "5m";
  std::vector<std::string> pools;
  std::string volume_root;
  bool allow_egress = false;
};

CLI::App* AddServeCommand(CLI::App& app, ServeFlags& flags);
// exe: the smolbox binary the server's children run (this one).
int RunServeCommand(const ServeFlags& flags, const std::string& exe);

struct McpFlags {
  std::string backend;
  int max_sandboxes = 8;
  std::string volume_root;
  bool allow_egress = false;
};

CLI::App* AddMcpCommand(CLI::App& app, McpFlags& flags);
int RunMcpCommand(const McpFlags& flags, const std::string& exe);

}  // namespace smolbox::cli
