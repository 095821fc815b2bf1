// A bundle's hooks: host programs the engine asks the runtime to run at points of a container's
// life, with the container's state JSON on their stdin. docker's libnetwork-setkey, a prestart
// hook, sets up the network namespace of the pid it is given.
//
// They come from the engine, as the rest of config.json does, and run as runc runs them: on the
// host, as the runtime's user, outside the sandbox, each bounded by its timeout (default 30 s).
// Hooks that would run inside the container (createContainer, startContainer) are refused.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "smolbox/error.h"

namespace smolbox::oci {

struct Hook {
  std::string path;               // absolute
  std::vector<std::string> args;  // argv, args[0] included; empty: {path}
  std::vector<std::string> env;   // the whole environment, NAME=VALUE
  std::optional<int> timeout_s;
};

struct Hooks {
  std::vector<Hook>
      create_runtime;  // createRuntime, then prestart: in create, before the sandbox starts
  std::vector<Hook> prestart;
  std::vector<Hook> poststart;  // after the process has started; a failure is only logged
  std::vector<Hook> poststop;   // in delete; a failure is only logged
  bool empty() const {
    return create_runtime.empty() && prestart.empty() && poststart.empty() && poststop.empty();
  }
};

// config.json's "hooks" object; errors name the field ("hooks.prestart[0].path").
Expected<Hooks> ParseHooks(const nlohmann::json& hooks);

// Runs each hook in turn with state on its stdin; the first that fails, exits non-zero or
// outlives its timeout is the error, naming it as stage[i].
Expected<void> RunHooks(const std::vector<Hook>& hooks, const std::string& stage,
                        const std::string& state);

}  // namespace smolbox::oci
