// Runs the smolvm-check binary as a user would, for the tests of its commands.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace smolvm_check {

struct Invocation {
  int exit_code = -1;  // 128+N when killed by signal N
  std::string out;
  std::string err;
  nlohmann::json report;  // stdout, parsed, when it is JSON
};

// Runs smolvm-check ARGS to completion (RunProgram: stdin from /dev/null, stdout and stderr in
// memory files, so neither can fill up or be held open by a sandbox it started).
Invocation RunCheck(std::vector<std::string> args);
// The same as the unprivileged uid nobody, from start to end (test_support/as-unprivileged).
Invocation RunCheckWithoutRoot(std::vector<std::string> args);

}  // namespace smolvm_check
