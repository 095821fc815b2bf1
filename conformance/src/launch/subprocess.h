// Runs a helper program (git, gh) to completion, without a shell, and captures what it prints.
// The program is looked up on the caller's PATH, so a stand-in placed first on it wins.
//
//   auto r = RunCaptured({"git", "rev-parse", "HEAD"});
//   SMOLBOX_TRY(r);                                  // could not be started at all
//   if (r->exit_code != 0) fmt::print("{}", r->err);
//   std::string sha = r->out;
#pragma once

#include <string>
#include <vector>

#include "smolbox/error.h"

namespace smolvm_check {

using smolbox::Error;
using smolbox::Expected;

struct Captured {
  int exit_code = -1;  // 128+N when killed by signal N
  std::string out;     // empty when stdout went to a file
  std::string err;
};

struct CaptureOptions {
  std::vector<std::string> extra_env;  // "K=V", added to the caller's environment
  bool only_extra_env = false;         // the environment is extra_env alone
  std::string stdout_path;             // when set, stdout goes to this file instead
};

// An error only when the program cannot be started (errno ENOENT: not on PATH); its own
// failure is a Captured with a non-zero exit_code.
Expected<Captured> RunCaptured(const std::vector<std::string>& argv,
                               const CaptureOptions& options = {});

// The first line of text, without the newline: what a one-line command printed.
std::string FirstLine(const std::string& text);

}  // namespace smolvm_check
