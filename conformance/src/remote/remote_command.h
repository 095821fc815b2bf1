// `smolvm-check remote github`: runs the battery on a GitHub Actions runner with /dev/kvm and
// brings the reports back.
#pragma once

#include <CLI/CLI.hpp>

namespace smolvm_check {

// Registers `remote` and its `github` subcommand; the callback stores the exit code.
void AddRemoteCommand(CLI::App& app, int& exit_code);

}  // namespace smolvm_check
