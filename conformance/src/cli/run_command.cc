#include "cli/run_command.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "battery/case_dir.h"
#include "battery/catalog.h"
#include "battery/report.h"
#include "battery/runner.h"
#include "launch/launcher.h"
#include "launch/profile.h"
#include "launch/profile_setup.h"

namespace smolvm_check {
namespace {

struct RunFlags {
  std::string sandbox = "smolbox:auto";
  std::vector<std::string> filters = {"*"};
  std::string category;
  std::vector<std::string> vars;  // NAME=VALUE
  int jobs = 1;
  std::string report_dir;
  bool json = false;
  std::string catalog = std::string(SMOLVM_CHECK_SOURCE_DIR) + "/adversarial/catalog.json";
  std::string profiles = std::string(SMOLVM_CHECK_SOURCE_DIR) + "/conformance/profiles";
};

// One line, rewritten in place on a terminal; a line per finished case otherwise.
std::function<void(const Progress&)> ProgressPrinter() {
  bool tty = isatty(STDERR_FILENO);
  return [tty, last_done = size_t{0}](const Progress& p) mutable {
    std::string line = fmt::format("[{}/{}] pass {} fail {}  {}", p.done, p.total, p.passed, p.failed, p.current);
    if (tty) {
      fmt::print(stderr, "\r\033[K{}", line.substr(0, 120));
      if (p.done == p.total) fmt::print(stderr, "\n");
    } else if (p.done != last_done) {
      fmt::print(stderr, "{}\n", line);
    }
    last_done = p.done;
  };
}

// The first line the profile's version command prints, for the report's header.
std::string SandboxVersion(const Profile& profile) {
  if (profile.version_command.empty() || profile.syntax_only) return "";
  Launch launch;
  launch.argv = profile.version_command;
  // sbin too: docker's version is its daemon's, /usr/sbin/dockerd.
  launch.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};
  launch.cwd = "/";
  launch.kill_after_ms = 10000;
  launch.capture_bytes = 4096;
  Observation o = LaunchInSafetyNet(launch);
  std::string text = o.stdout_data.empty() ? o.stderr_data : o.stdout_data;
  return text.substr(0, text.find('\n'));
}

int Run(const RunFlags& flags) {
  auto catalog = LoadCatalog(flags.catalog);
  if (!catalog) return fmt::print(stderr, "smolvm-check: {}\n", catalog.error().ToString()), kExitUsage;
  std::map<std::string, std::string> overrides;
  for (const std::string& var : flags.vars) {
    size_t equals = var.find('=');
    if (equals == std::string::npos || equals == 0) {
      return fmt::print(stderr, "smolvm-check: --var: {:?} is not NAME=VALUE\n", var), kExitUsage;
    }
    overrides[var.substr(0, equals)] = var.substr(equals + 1);
  }
  auto profile = LoadProfile(flags.sandbox, flags.profiles, overrides);
  if (!profile) return fmt::print(stderr, "smolvm-check: {}\n", profile.error().ToString()), kExitUsage;
  std::vector<Case> cases = SelectCases(*catalog, flags.filters, flags.category);
  if (cases.empty()) {
    fmt::print(stderr, "smolvm-check: --filter/--category: no case matches\n");
    return kExitUsage;
  }
  auto setup = ProfileSetup::Start(*profile);  // torn down when Run returns
  if (!setup) return fmt::print(stderr, "smolvm-check: sandbox {}: {}\n", flags.sandbox, setup.error().ToString()), kExitUsage;
  auto work_root = MakeWorkRoot();
  if (!work_root) return fmt::print(stderr, "smolvm-check: {}\n", work_root.error().ToString()), kExitUsage;
  BatteryReport report{flags.sandbox, SandboxVersion(*profile), DescribeHost(), NowIso8601(), {},
                       profile->startup_allowance_ms};
  RunOptions options;
  options.jobs = flags.jobs;
  options.work_root = *work_root;
  report.cases = RunBattery(*profile, cases, catalog->directory, options, ProgressPrinter());
  std::error_code ignored;
  std::filesystem::remove_all(*work_root, ignored);
  if (!flags.report_dir.empty()) {
    if (auto ok = WriteReports(report, flags.report_dir); !ok) {
      return fmt::print(stderr, "smolvm-check: --report-dir: {}\n", ok.error().ToString()), kExitUsage;
    }
  }
  if (flags.json) fmt::print("{}\n", ToJson(report).dump(2));
  else PrintTable(report, std::cout, isatty(STDOUT_FILENO) && !getenv("NO_COLOR"));
  bool any_failed = std::any_of(report.cases.begin(), report.cases.end(), [](const CaseReport& r) {
    return r.verdict == Verdict::kFail || r.verdict == Verdict::kError;
  });
  return any_failed ? kExitSomeFailed : kExitAllPassed;
}

}  // namespace

void AddRunCommand(CLI::App& app, int& exit_code) {
  auto flags_ptr = std::make_shared<RunFlags>();
  RunFlags& flags = *flags_ptr;
  CLI::App* run = app.add_subcommand("run", "Run the adversarial battery against a sandbox");
  run->add_option("--sandbox", flags.sandbox,
                  "smolbox:ns, smolbox:auto, smolbox:vm, smolbox:vm-tcg (each also as smolbox:ns@IMAGE, an image from smolbox's store), null, a profile name or a profile path")
      ->capture_default_str();
  run->add_option("--filter", flags.filters, "Only cases whose id matches this glob; repeatable, a case matching any is run")
      ->capture_default_str();
  run->add_option("--category", flags.category, "Only cases of this category");
  run->add_option("--var", flags.vars,
                  "Set a variable the profile declares, e.g. --var image=app:1 for smolbox's or docker's {image}; repeatable")
      ->type_name("NAME=VALUE")
      ->allow_extra_args(false);
  run->add_option("-j,--jobs", flags.jobs, "Cases to run in parallel")->check(CLI::Range(1, 64))->capture_default_str();
  run->add_option("--report-dir", flags.report_dir, "Write report.json, junit.xml and report.md here");
  run->add_flag("--json", flags.json, "Print report.json instead of the table");
  run->add_option("--catalog", flags.catalog, "The battery's catalog.json")->capture_default_str();
  run->add_option("--profiles", flags.profiles, "Directory of sandbox profiles")->capture_default_str();
  run->callback([flags_ptr, &exit_code] { exit_code = Run(*flags_ptr); });
}

}  // namespace smolvm_check

