// smolbox serve: the HTTP API (docs/api.md) from the command line.
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
  std::string drain_timeout = "30s";
};

CLI::App* AddServeCommand(CLI::App& app, ServeFlags& flags);
// exe: the smolbox binary the server's children run (this one).
int RunServeCommand(const ServeFlags& flags, const std::string& exe);

}  // namespace smolbox::cli
