// What the API server and the MCP server both do to start work: a one-shot run and a create,
// each in a child `smolbox` process (smolbox_child.h), and the ids of the sandboxes they make.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "smolbox/error.h"
#include "smolbox/spec.h"

namespace smolbox::api {

// API sandboxes are persistent sandboxes whose names start with this.
inline constexpr std::string_view kSandboxPrefix = "api-";

struct Launcher {
  std::string smolbox_exe;  // the binary the children run
  int lifeline_fd = -1;     // the read end each created sandbox's keeper holds
  int cancel_fd = -1;       // once readable, children in flight are killed
  std::string volume_root;  // given to each child as --volume-root, when set

  // Runs spec_json (already parsed as spec) in a fresh sandbox; returns run --json's result.
  Expected<nlohmann::json> Run(const std::string& spec_json, const RunSpec& spec) const;
  // Creates the sandbox id from spec_json (a RunSpec without argv); returns create --json's
  // setup, or an error (where "sandbox") saying why it could not be created. Nothing is left
  // of a sandbox that failed.
  Expected<nlohmann::json> Create(const std::string& id, const std::string& spec_json) const;

 private:
  void AddVolumeRoot(std::vector<std::string>& args) const;
};

// A server's --volume-root: an absolute path to a directory (the volumes' sources are opened
// beneath it, so it needs no more checking here).
Expected<void> CheckVolumeRoot(const std::string& volume_root);

// "api-" and 16 random hex digits.
Expected<std::string> NewSandboxId();

// What a server that died left: its sandboxes' keepers tore them down when its lifeline hung
// up; their directories, and any stale run's, are removed here. A live server's are left alone.
void SweepDeadApiSandboxes(const char* who);

}  // namespace smolbox::api
