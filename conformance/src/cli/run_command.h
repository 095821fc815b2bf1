// `smolvm-check run`: the adversarial battery against one sandbox.
//
//   smolvm-check run [--sandbox S] [--filter GLOB] [--category C] [-j N] [--report-dir DIR]
//                    [--json]
#pragma once

#include <CLI/CLI.hpp>

namespace smolvm_check {

// Exit codes of run: every case passed; some failed or could not be judged; bad input.
inline constexpr int kExitAllPassed = 0;
inline constexpr int kExitSomeFailed = 1;
inline constexpr int kExitUsage = 2;

// Registers the subcommand; its callback stores the exit code.
void AddRunCommand(CLI::App& app, int& exit_code);

}  // namespace smolvm_check
