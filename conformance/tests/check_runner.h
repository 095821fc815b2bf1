// Runs the smolvm-check binary as a user would, for the tests of its commands.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace smolvm_check {

struct Invocation {
  int exit_code = -1;
  std::string out;
  std::string err;
  nlohmann::json report;  // stdout, parsed, when it is JSON
};

// Runs smolvm-check ARGS with stdout and stderr to files, so neither pipe can fill up.
Invocation RunCheck(std::vector<std::string> args);

}  // namespace smolvm_check
