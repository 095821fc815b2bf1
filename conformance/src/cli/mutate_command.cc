#include "cli/mutate_command.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "battery/case_dir.h"
#include "battery/catalog.h"
#include "battery/runner.h"
#include "cli/run_command.h"
#include "launch/launcher.h"
#include "launch/profile.h"
#include "mutate/mutant_guest.h"
#include "mutate/mutant_table.h"
#include "mutate/mutant_tests.h"
#include "mutate/mutation_report.h"

namespace smolvm_check {
namespace {

struct MutateFlags {
  std::string sandbox = "smolbox:ns";
  std::string smolbox;  // the mutant build; default $SMOLBOX_MUTANT, else build-mutants/bin/smolbox
  std::vector<std::string> only;
  int jobs = 2;
  std::string report_dir;
  std::string guest_dir;  // vm: the mutant's guest; default beside its bin/, in guest/
  std::string table = std::string(SMOLVM_CHECK_SOURCE_DIR) + "/conformance/mutants.json";
  std::string catalog = std::string(SMOLVM_CHECK_SOURCE_DIR) + "/adversarial/catalog.json";
  std::string profiles = std::string(SMOLVM_CHECK_SOURCE_DIR) + "/conformance/profiles";
};

int Usage(const std::string& text) {
  fmt::print(stderr, "smolvm-check: {}\n", text);
  return kExitUsage;
}

// "ns" or "vm" for smolbox:ns, smolbox:vm, smolbox:vm-tcg (and their @IMAGE forms); "" else.
std::string BackendOf(const std::string& sandbox) {
  std::string variant = sandbox.substr(0, sandbox.find('@'));
  if (variant == "smolbox:ns") return "ns";
  if (variant == "smolbox:vm" || variant == "smolbox:vm-tcg") return "vm";
  return "";
}

std::string MutantBinary(const MutateFlags& flags) {
  if (!flags.smolbox.empty()) return flags.smolbox;
  if (const char* set = getenv("SMOLBOX_MUTANT"); set && *set) return set;
  return std::string(SMOLVM_CHECK_SOURCE_DIR) + "/build-mutants/bin/smolbox";
}

struct MutantBuild {
  std::string version;             // the first line of --version
  std::set<std::string> switches;  // listed after its "mutant build" line: "  NAME  what"
};

Expected<MutantBuild> ReadMutantBuild(const std::string& binary) {
  Launch launch;
  launch.argv = {binary, "--version"};
  launch.env = {"PATH=/usr/local/bin:/usr/bin:/bin"};
  launch.cwd = "/";
  launch.kill_after_ms = 10000;
  launch.capture_bytes = 1 << 16;
  Observation o = LaunchInSafetyNet(launch);
  if (!o.error.empty()) {
    return std::unexpected(Error::Field("--smolbox", fmt::format("{} cannot be run: {}", binary, o.error)));
  }
  if (o.stdout_data.find("mutant build") == std::string::npos) {
    std::string said = o.stdout_data.substr(0, o.stdout_data.find('\n'));
    if (said.empty()) said = fmt::format("its --version printed nothing (exit {})", o.exit_code);
    return std::unexpected(Error::Field("--smolbox", fmt::format("{} is no mutant build (configure it with "
                                                                 "-DSMOLBOX_MUTANTS=ON; scripts/mutate does): {}",
                                                                 binary, said)));
  }
  MutantBuild build;
  build.version = binary + ": " + o.stdout_data.substr(0, o.stdout_data.find('\n'));
  std::istringstream lines(o.stdout_data.substr(o.stdout_data.find("mutant build")));
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string name;
    if (line.starts_with("  ") && words >> name) build.switches.insert(name);
  }
  return build;
}

// The table and the build must name the same switches: a row for a switch the build lacks would
// run an unchanged smolbox, and a switch with no row would go unmeasured.
Expected<void> CheckSameSwitches(const MutantTable& table, const std::set<std::string>& built) {
  std::set<std::string> listed;
  for (const Mutant& m : table.mutants) {
    listed.insert(m.name);
    if (!built.contains(m.name)) return std::unexpected(Error::Field("mutants.json", fmt::format("{:?} is no switch of this mutant build", m.name)));
  }
  for (const std::string& name : built) {
    if (!listed.contains(name)) return std::unexpected(Error::Field("mutants.json", fmt::format("the build's switch {:?} has no row", name)));
  }
  return {};
}

std::vector<Case> CasesOf(const Catalog& catalog, const std::set<std::string>& categories) {
  std::vector<Case> cases;
  for (const Case& c : catalog.cases) {
    if (categories.contains(c.category)) cases.push_back(c);
  }
  return cases;
}

// The runs are many: one line per mutant, not per case.
std::function<void(const Progress&)> Quiet() {
  return [](const Progress&) {};
}

int64_t MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
}

int Mutate(const MutateFlags& flags) {
  auto start = std::chrono::steady_clock::now();
  std::string backend = BackendOf(flags.sandbox);
  if (backend.empty()) return Usage(fmt::format("--sandbox: {:?}: mutate runs against smolbox:ns or smolbox:vm-tcg", flags.sandbox));
  auto catalog = LoadCatalog(flags.catalog);
  if (!catalog) return Usage(catalog.error().ToString());
  auto table = LoadMutantTable(flags.table, *catalog);
  if (!table) return Usage(table.error().ToString());
  std::string binary = MutantBinary(flags);
  auto build = ReadMutantBuild(binary);
  if (!build) return Usage(build.error().ToString());
  const std::set<std::string>& built = build->switches;
  if (auto same = CheckSameSwitches(*table, built); !same) return Usage(same.error().ToString());
  // Every run of a microVM mutant boots the mutant's own guest, never the release one.
  std::vector<std::string> sandbox_env;
  if (backend == "vm") {
    std::filesystem::path bin_dir = std::filesystem::path(binary).parent_path();
    std::string guest_dir = flags.guest_dir.empty() ? (bin_dir.parent_path() / "guest").string() : flags.guest_dir;
    if (auto guest = CheckMutantGuest(guest_dir, (bin_dir / "smolbox-agent").string()); !guest) {
      return Usage(guest.error().ToString());
    }
    sandbox_env.push_back("SMOLBOX_GUEST_DIR=" + guest_dir);
  }
  std::vector<Mutant> chosen;
  for (const std::string& name : flags.only) {
    if (!built.contains(name)) return Usage(fmt::format("--only: {:?} is no protection of the build", name));
  }
  std::set<std::string> categories;
  for (const Mutant& m : table->mutants) {
    bool wanted = flags.only.empty() || std::find(flags.only.begin(), flags.only.end(), m.name) != flags.only.end();
    bool applies = std::find(m.backends.begin(), m.backends.end(), backend) != m.backends.end();
    if (!wanted || !applies) continue;
    chosen.push_back(m);
    categories.insert(m.categories.begin(), m.categories.end());
  }
  if (chosen.empty()) return Usage(fmt::format("no mutant of the table applies to {}", flags.sandbox));
  const std::string bin_dir = std::filesystem::path(binary).parent_path().string();
  for (const Mutant& m : chosen) {
    // A missing binary would fail its baseline too, and then count against no mutant.
    if (m.tests && access((bin_dir + "/" + m.tests->binary).c_str(), X_OK) != 0) {
      return Usage(fmt::format("mutants.json: {}'s tests need {}/{}, which is missing: build it in the mutant build "
                               "(scripts/mutate does)", m.name, bin_dir, m.tests->binary));
    }
  }
  auto profile = LoadProfile(flags.sandbox, flags.profiles, {{"smolbox", binary}});
  if (!profile) return Usage(profile.error().ToString());
  auto work_root = MakeWorkRoot();
  if (!work_root) return Usage(work_root.error().ToString());
  RunOptions options;
  options.jobs = flags.jobs;
  options.work_root = *work_root;
  options.sandbox_env = sandbox_env;

  MutationReport report;
  report.sandbox = flags.sandbox;
  report.smolbox_version = build->version;
  report.host = DescribeHost();
  report.started = NowIso8601();
  // The same cases with nothing off: a case that fails here is no evidence against a mutant.
  auto baseline_start = std::chrono::steady_clock::now();
  std::set<std::string> baseline_failed;
  auto note_baseline = [&](const std::vector<CaseReport>& cases) {
    for (const CaseReport& c : cases) {
      if (c.verdict == Verdict::kFail || c.verdict == Verdict::kError) {
        baseline_failed.insert(c.id);
        report.baseline_failures.push_back(c.id);
      }
    }
  };
  if (!categories.empty()) note_baseline(RunBattery(*profile, CasesOf(*catalog, categories), catalog->directory, options, Quiet()));
  std::set<std::pair<std::string, std::string>> suites_run;
  for (const Mutant& m : chosen) {
    if (m.tests && suites_run.insert({m.tests->binary, m.tests->filter}).second) {
      note_baseline(RunMutantTests(bin_dir, *m.tests, ""));
    }
  }
  report.baseline_ms = MsSince(baseline_start);
  fmt::print(stderr, "baseline: {} cases fail with no protection off ({} s)\n", baseline_failed.size(), report.baseline_ms / 1000);
  for (size_t i = 0; i < chosen.size(); ++i) {
    const Mutant& m = chosen[i];
    options.sandbox_env = sandbox_env;
    options.sandbox_env.push_back("SMOLBOX_DISABLE=" + m.name);
    auto mutant_start = std::chrono::steady_clock::now();
    std::set<std::string> own(m.categories.begin(), m.categories.end());
    std::vector<CaseReport> cases;
    if (!own.empty()) cases = RunBattery(*profile, CasesOf(*catalog, own), catalog->directory, options, Quiet());
    if (m.tests) {
      auto tests = RunMutantTests(bin_dir, *m.tests, m.name);
      cases.insert(cases.end(), tests.begin(), tests.end());
    }
    MutantResult result = Judge(m, cases, baseline_failed);
    result.wall_ms = MsSince(mutant_start);
    fmt::print(stderr, "[{}/{}] {}: {} ({} s)\n", i + 1, chosen.size(), m.name, VerdictName(result.verdict), result.wall_ms / 1000);
    report.results.push_back(std::move(result));
  }
  report.wall_ms = MsSince(start);
  std::error_code ignored;
  std::filesystem::remove_all(*work_root, ignored);
  if (!flags.report_dir.empty()) {
    if (auto ok = WriteMutationReports(report, flags.report_dir); !ok) return Usage("--report-dir: " + ok.error().ToString());
  }
  fmt::print("{}", ToMarkdown(report));
  return Survivors(report) == 0 ? kExitAllPassed : kExitSomeFailed;
}

}  // namespace

void AddMutateCommand(CLI::App& app, int& exit_code) {
  auto flags_ptr = std::make_shared<MutateFlags>();
  MutateFlags& flags = *flags_ptr;
  CLI::App* mutate = app.add_subcommand("mutate", "Run the battery against a mutant smolbox, one protection off at a time");
  mutate->add_option("--sandbox", flags.sandbox, "smolbox:ns or smolbox:vm-tcg")->capture_default_str();
  mutate->add_option("--smolbox", flags.smolbox, "The mutant build's smolbox (default $SMOLBOX_MUTANT, else build-mutants/bin/smolbox)");
  mutate->add_option("--only", flags.only, "Only this protection; repeatable")->allow_extra_args(false);
  mutate->add_option("-j,--jobs", flags.jobs, "Cases to run in parallel")->check(CLI::Range(1, 64))->capture_default_str();
  mutate->add_option("--report-dir", flags.report_dir, "Write mutation.json, mutation.md and mutation.xml here");
  mutate->add_option("--guest-dir", flags.guest_dir, "smolbox:vm-tcg: the mutant's guest, its agent the mutant's (default: guest/ beside the mutant's bin/)");
  mutate->add_option("--table", flags.table, "The mutants' table")->capture_default_str();
  mutate->add_option("--catalog", flags.catalog, "The battery's catalog.json")->capture_default_str();
  mutate->add_option("--profiles", flags.profiles, "Directory of sandbox profiles")->capture_default_str();
  mutate->callback([flags_ptr, &exit_code] { exit_code = Mutate(*flags_ptr); });
}

}  // namespace smolvm_check
