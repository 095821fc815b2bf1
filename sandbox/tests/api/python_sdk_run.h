// A run through the Python SDK (sdk/python) against a real server: the SDK's path for a spec.
//
//   json result = RunThroughPythonSdk(server.address(), {{"argv", {...}}, {"image", "test/py:1"}});
//   result["status"], result["exit_code"], result["stdout"]; not an object when the SDK failed
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace smolbox::testing {

// smolbox.run with the spec's fields as its keywords (limits flattened, times in seconds),
// printing the result's status, exit code and stdout as JSON; what it printed, parsed.
// error: what the SDK wrote to stderr, for a failed assertion's message.
nlohmann::json RunThroughPythonSdk(const std::string& address, const nlohmann::json& spec, std::string* error = nullptr);

}  // namespace smolbox::testing
