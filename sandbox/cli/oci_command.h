// smolbox oci (and smolbox-oci, the same binary by another name): the OCI runtime command line
// that engines call, with runc's global flags before the command (docs/oci.md).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "oci_runtime.h"

namespace smolbox::cli {

struct OciFlags {
  oci::GlobalOptions global;
  std::string log_format = "text";
  std::string backend = "auto";
  oci::CreateOptions create;
  oci::ExecOptions exec;
  std::string id;
  std::string signal = "SIGTERM";
  bool all = false;
  bool force = false;
  bool detach = false;
  std::string ps_format = "table";
};

CLI::App* AddOciCommand(CLI::App& app, OciFlags& flags);
int RunOciCommand(const CLI::App& oci, OciFlags& flags);

}  // namespace smolbox::cli
