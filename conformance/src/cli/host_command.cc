#include "cli/host_command.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "launch/smolbox_install.h"
#include "remote/remote_command.h"
#include "smolbox/host.h"

namespace smolvm_check {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// After the host's own steps. A backend is matched by its sandbox name, which run --sandbox takes.
void AddBatterySteps(smolbox::host::HostReport& report) {
  auto& steps = report.next_steps;
  if (report.hardware_isolation_usable) {
    steps.push_back("KVM is ready: smolvm-check run --sandbox smolbox:vm");
    return;
  }
  steps.push_back(
      fmt::format("Run the battery on a GitHub Actions runner with KVM: {}", kRemoteFallback));
  const auto& backends = report.backends;
  if (std::any_of(backends.begin(), backends.end(), [](const auto& b) { return b.usable(); })) {
    steps.push_back("Meanwhile the ns backend runs here: smolvm-check run --sandbox smolbox:ns");
  }
  if (std::any_of(backends.begin(), backends.end(),
                  [](const auto& b) { return b.sandbox == "smolbox:vm-tcg" && b.usable(); })) {
    steps.push_back(
        "The vm backend also runs here under emulation, slowly: smolvm-check run --sandbox "
        "smolbox:vm-tcg");
  }
}

}  // namespace

smolbox::Expected<smolbox::host::HostReport> ProbeHost(
    const smolbox::host::ProbeOptions& options, std::vector<smolbox::host::ProbedPath>* probed) {
  std::vector<smolbox::host::ProbedPath> unused;
  auto report = smolbox::host::ProbeHost(options, probed != nullptr ? *probed : unused);
  if (report) AddBatterySteps(*report);
  return report;
}

int RunHost(const HostFlags& flags, std::ostream& out, std::ostream& err, bool color) {
  if (flags.cpuid) {
    out << smolbox::host::LiveCpuidHypervisor() << "\n";
    return kHostUsable;
  }
  smolbox::host::ProbeOptions options{flags.root, Env("PATH"), GuestDirToRun()};
  std::vector<smolbox::host::ProbedPath> probed;
  auto report = ProbeHost(options, &probed);
  if (!report) {
    err << fmt::format("smolvm-check host: --root {}\n", report.error().ToString());
    return kHostProbeFailed;
  }
  if (flags.list_files) {
    for (const auto& p : probed) out << ToString(p.kind) << "\t" << p.path << "\n";
    return kHostUsable;
  }
  if (flags.json)
    out << ToJson(*report).dump(2) << "\n";
  else
    out << Render(*report, color);
  return ExitCode(*report);
}

void AddHostCommand(CLI::App& app, int& exit_code) {
  auto flags_ptr = std::make_shared<HostFlags>();
  HostFlags& flags = *flags_ptr;
  CLI::App* host = app.add_subcommand("host", "What this machine can isolate with, KVM first");
  host->add_flag("--json", flags.json, "Print the report as JSON");
  host->add_option("--root", flags.root,
                   "Read /proc, /sys and /dev facts from this host fixture instead of this machine")
      ->option_text("DIR");
  host->add_flag("--list-files", flags.list_files,
                 "List the paths the probe reads (what scripts/capture-host-fixture copies)");
  host->add_flag("--cpuid", flags.cpuid, "Print the CPUID hypervisor vendor (for fixtures)");
  host->footer("Exit codes: 0 hardware isolation is usable, 1 it is not, 2 the probe failed.");
  host->callback([flags_ptr, &exit_code] {
    // no-color.org: a NO_COLOR that is set and not empty turns colour off.
    bool color = isatty(STDOUT_FILENO) && Env("NO_COLOR").empty();
    exit_code = RunHost(*flags_ptr, std::cout, std::cerr, color);
  });
}

}  // namespace smolvm_check
