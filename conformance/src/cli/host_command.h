// `smolvm-check host`: what this machine can isolate with, KVM first.
//
//   smolvm-check host [--json] [--root DIR]
//   smolvm-check host --list-files   # what scripts/capture-host-fixture copies
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "smolbox/host.h"

namespace smolvm_check {

struct HostFlags {
  bool json = false;
  std::string root;
  bool list_files = false;
  bool cpuid = false;
};

// Exit codes: 0 hardware isolation is usable here, 1 it is not, 2 the probe itself failed.
inline constexpr int kHostUsable = 0;
inline constexpr int kHostNotUsable = 1;
inline constexpr int kHostProbeFailed = 2;

// smolbox::host::ProbeHost, and then the battery's next steps after the host's own: on the vm
// backend where hardware isolation is usable; where it is not, on a GitHub Actions runner with
// KVM (kRemoteFallback), and meanwhile on the backends that run here.
smolbox::Expected<smolbox::host::HostReport> ProbeHost(
    const smolbox::host::ProbeOptions& options,
    std::vector<smolbox::host::ProbedPath>* probed = nullptr);

// The command's body, with its streams and colour chosen by the caller: tests drive it directly.
int RunHost(const HostFlags& flags, std::ostream& out, std::ostream& err, bool color);

// Registers the subcommand; its callback stores the command's exit code in exit_code.
void AddHostCommand(CLI::App& app, int& exit_code);

}  // namespace smolvm_check
