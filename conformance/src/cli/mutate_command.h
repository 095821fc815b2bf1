// `smolvm-check mutate`: the battery against mutant builds of smolbox, one protection off at a
// time, to show that it notices each one missing (docs/mutation.md).
//
//   smolvm-check mutate --sandbox smolbox:ns|smolbox:vm-tcg [--smolbox MUTANT] [--only NAME]...
//                       [-j N] [--report-dir DIR]
#pragma once

#include <CLI/CLI.hpp>

namespace smolvm_check {

// Registers the subcommand; its callback stores the exit code: 0 when no mutant survived, 1
// when one did, 2 for bad input.
void AddMutateCommand(CLI::App& app, int& exit_code);

}  // namespace smolvm_check
