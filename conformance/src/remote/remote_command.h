// `smolvm-check remote github`: runs the battery on a GitHub Actions runner with /dev/kvm and
// brings the reports back.
#pragma once

#include <CLI/CLI.hpp>

namespace smolvm_check {

// The command that runs the battery on a GitHub Actions runner with KVM: what a host without
// hardware isolation is told to run instead (smolvm-check host).
inline constexpr const char* kRemoteFallback = "smolvm-check remote github --repo OWNER/NAME";

// Registers `remote` and its `github` subcommand; the callback stores the exit code.
void AddRemoteCommand(CLI::App& app, int& exit_code);

}  // namespace smolvm_check
