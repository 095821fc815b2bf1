#include "bench/bench_command.h"

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "battery/case_dir.h"
#include "battery/report.h"
#include "bench/bench.h"
#include "launch/interrupt.h"
#include "launch/profile_setup.h"
#include "launch/smolbox_install.h"
#include "program.h"
#include "smolbox/host.h"

namespace smolvm_check {
namespace {

struct BenchFlags {
  std::vector<std::string> sandboxes;
  std::string lang;  // empty: python and js
  int runs = 10;
  bool no_transform = false;
  bool no_egress = false;
  bool no_api = false;
  int burst = 300;
  std::string report_dir;
  bool json = false;
  std::string catalog = std::string(SMOLVM_CHECK_SOURCE_DIR) + "/adversarial/catalog.json";
  std::string profiles = std::string(SMOLVM_CHECK_SOURCE_DIR) + "/conformance/profiles";
};

// The baseline, then every smolbox backend the host probe calls usable (vm with and without its
// boot snapshot), then installed peers.
std::vector<std::string> DefaultSandboxes() {
  std::vector<std::string> sandboxes = {"null"};
  const char* path = std::getenv("PATH");
  auto host = smolbox::host::ProbeHost({"", path != nullptr ? path : "", GuestDirToRun()});
  bool kvm = false;
  if (host) {
    for (const auto& b : host->backends) kvm |= b.usable() && b.sandbox == "smolbox:vm";
    for (const auto& b : host->backends) {
      if (!b.usable() || (kvm && b.sandbox == "smolbox:vm-tcg")) continue;
      if (std::find(sandboxes.begin(), sandboxes.end(), b.sandbox) != sandboxes.end()) continue;
      sandboxes.push_back(b.sandbox);
      // The vm backend three times: restored from its boot snapshot, booted from scratch, and
      // (warm rows only) with its Python prewarmed.
      if (b.sandbox.starts_with("smolbox:vm")) {
        sandboxes.push_back(b.sandbox + "-fresh");
        sandboxes.push_back(b.sandbox + "-prewarm");
      }
    }
  } else {
    sandboxes.push_back("smolbox:ns");
  }
  for (const char* peer : {"bwrap", "runsc", "firejail"}) {
    if (!smolbox::FindOnPath(path != nullptr ? path : "/usr/bin:/bin", peer).empty()) sandboxes.push_back(peer);
  }
  return sandboxes;
}

int RunBenchCommand(const BenchFlags& flags) {
  auto catalog = LoadCatalog(flags.catalog);
  if (!catalog) return fmt::print(stderr, "smolvm-check: {}\n", catalog.error().ToString()), 2;
  std::vector<Workload> workloads;
  WorkloadChoice choice{!flags.no_transform, !flags.no_egress, !flags.no_api};
  if (choice.egress && geteuid() != 0) {
    fmt::print(stderr, "smolvm-check: bench: the egress workloads need root, for the test internet's network "
                       "namespaces; they are left out\n");
    choice.egress = false;
  }
  for (const std::string& lang : flags.lang.empty() ? std::vector<std::string>{"python", "js"}
                                                    : std::vector<std::string>{flags.lang}) {
    auto more = BenchWorkloads(*catalog, lang, choice);
    if (!more) return fmt::print(stderr, "smolvm-check: {}\n", more.error().ToString()), 2;
    workloads.insert(workloads.end(), more->begin(), more->end());
  }
  BenchPlan plan{flags.sandboxes.empty() ? DefaultSandboxes() : flags.sandboxes, std::move(workloads), flags.runs,
                 flags.burst};
  std::vector<Profile> profiles;
  for (const auto& sandbox : plan.sandboxes) {
    auto profile = LoadProfile(sandbox, flags.profiles);
    if (!profile) return fmt::print(stderr, "smolvm-check: {}\n", profile.error().ToString()), 2;
    if (profile->syntax_only) {
      return fmt::print(stderr, "smolvm-check: --sandbox {}: validated for syntax only here; it cannot be timed\n", sandbox), 2;
    }
    profiles.push_back(std::move(*profile));
  }
  std::vector<ProfileSetup> setups;  // torn down when the bench returns
  for (size_t i = 0; i < profiles.size(); ++i) {
    auto setup = ProfileSetup::Start(profiles[i]);
    if (!setup) return fmt::print(stderr, "smolvm-check: sandbox {}: {}\n", plan.sandboxes[i], setup.error().ToString()), 2;
    setups.push_back(std::move(*setup));
  }
  auto work_root = MakeWorkRoot();
  if (!work_root) return fmt::print(stderr, "smolvm-check: {}\n", work_root.error().ToString()), 2;
  std::string started = NowIso8601();
  InterruptScope interrupt_scope;  // SIGINT and SIGTERM end the runs; the warm sandboxes are removed
  BenchReport report = RunBench(plan, profiles, catalog->directory, *work_root,
                                [](const std::string& line) { fmt::print(stderr, "{}\n", line); });
  report.host = DescribeHost();
  report.started = started;
  std::error_code ignored;
  std::filesystem::remove_all(*work_root, ignored);
  if (!flags.report_dir.empty()) {
    if (auto ok = WriteBenchReports(report, flags.report_dir); !ok) {
      return fmt::print(stderr, "smolvm-check: --report-dir: {}\n", ok.error().ToString()), 2;
    }
  }
  if (flags.json) fmt::print("{}\n", ToJson(report).dump(2));
  else fmt::print("{}", ToMarkdown(report));
  if (Interrupted()) return fmt::print(stderr, "smolvm-check: bench interrupted\n"), 128 + InterruptSignal();
  bool any_failed = std::any_of(report.rows.begin(), report.rows.end(), [](const BenchRow& r) { return !r.failures.empty(); });
  return any_failed ? 1 : 0;
}

}  // namespace

void AddBenchCommand(CLI::App& app, int& exit_code) {
  CLI::App* bench = app.add_subcommand(
      "bench", "Time cold starts, warm execs into a persistent sandbox, a 10 MB CSV-to-JSON transform, egress "
               "fetches (a 1 KiB GET, a 100 MB download) on the test internet and requests to the HTTP API, side by "
               "side, interleaved");
  auto flags = std::make_shared<BenchFlags>();
  bench->add_option("--sandbox", flags->sandboxes,
                    "Repeatable; the first is the baseline (default: null, the smolbox backends this "
                    "host runs, bwrap and runsc where installed)");
  bench->add_option("--lang", flags->lang, "python or js (default both)")->check(CLI::IsMember({"python", "js"}));
  bench->add_option("--runs", flags->runs, "Runs per row")->check(CLI::Range(1, 1000))->capture_default_str();
  bench->add_flag("--no-transform", flags->no_transform, "Leave out the CSV-to-JSON transform");
  bench->add_flag("--no-egress", flags->no_egress,
                  "Leave out the egress fetches (they need root; a sandbox whose profile cannot give an egress "
                  "policy has no row for them)");
  bench->add_flag("--no-api", flags->no_api,
                  "Leave out the HTTP API rows (python print(42) through smolbox serve: a run from a warm pool, a "
                  "run of its own, an exec into a created sandbox)");
  bench->add_option("--burst", flags->burst,
                    "With the API rows: after the runs, this many runs at once to each API server, without a "
                    "pool and with one, for their p50 and p99 latency and throughput; 0 for none")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  bench->add_option("--report-dir", flags->report_dir, "Write bench.json, bench.md and bench.svg here");
  bench->add_flag("--json", flags->json, "Print bench.json instead of the table");
  bench->add_option("--catalog", flags->catalog, "The battery's catalog.json")->capture_default_str();
  bench->add_option("--profiles", flags->profiles, "Directory of sandbox profiles")->capture_default_str();
  bench->callback([flags, &exit_code] { exit_code = RunBenchCommand(*flags); });
}

}  // namespace smolvm_check
