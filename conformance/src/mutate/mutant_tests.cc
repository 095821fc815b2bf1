#include "mutate/mutant_tests.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "launch/launcher.h"

namespace smolvm_check {
namespace {

constexpr int64_t kTestsBoundMs = 600000;
constexpr size_t kTestsOutputBytes = 4 << 20;

// "[       OK ] Suite.name (12 ms)" and "[  FAILED  ] Suite.name (12 ms)": a test's own line.
// The summary's "[  FAILED  ] Suite.name" lines have no time, and are not counted twice.
bool ParseResultLine(const std::string& line, CaseReport& c) {
  static const std::string kOk = "[       OK ] ";
  static const std::string kFailed = "[  FAILED  ] ";
  bool ok = line.starts_with(kOk);
  if (!ok && !line.starts_with(kFailed)) return false;
  if (!line.ends_with(" ms)")) return false;
  size_t name_end = line.rfind(" (");
  if (name_end == std::string::npos || name_end <= kOk.size()) return false;
  c.id = line.substr(kOk.size(), name_end - kOk.size());
  c.verdict = ok ? Verdict::kPass : Verdict::kFail;
  c.reason = ok ? "" : "the test failed with the protection off";
  c.wall_ms = std::atoll(line.c_str() + name_end + 2);
  return true;
}

CaseReport TestCase(std::string id, Verdict verdict, std::string reason) {
  CaseReport c;
  c.id = std::move(id);
  c.category = "tests";
  c.kind = "test";
  c.verdict = verdict;
  c.reason = std::move(reason);
  return c;
}

}  // namespace

std::vector<CaseReport> RunMutantTests(const std::string& bin_dir, const MutantTests& tests, const std::string& disable) {
  Launch launch;
  launch.argv = {bin_dir + "/" + tests.binary, "--gtest_filter=" + tests.filter, "--gtest_color=no"};
  launch.env = {"PATH=/usr/local/bin:/usr/bin:/bin"};
  if (!disable.empty()) launch.env.push_back("SMOLBOX_DISABLE=" + disable);
  launch.cwd = "/";
  launch.kill_after_ms = kTestsBoundMs;
  launch.capture_bytes = kTestsOutputBytes;
  Observation o = LaunchInSafetyNet(launch);
  std::vector<CaseReport> cases;
  std::istringstream lines(o.stdout_data);
  for (std::string line; std::getline(lines, line);) {
    CaseReport c = TestCase("", Verdict::kError, "");
    if (ParseResultLine(line, c)) cases.push_back(std::move(c));
  }
  bool failed = std::any_of(cases.begin(), cases.end(), [](const CaseReport& c) { return c.verdict == Verdict::kFail; });
  if (!cases.empty() && !failed && (o.exit_code != 0 || o.signal != 0)) {
    // It ended before it could report a failure: a crash is a failure too.
    cases.push_back(TestCase(tests.binary, Verdict::kFail,
                             o.signal ? fmt::format("killed by signal {}", o.signal) : fmt::format("exited {}", o.exit_code)));
  }
  if (cases.empty()) {
    cases.push_back(TestCase(tests.binary, Verdict::kError,
                             !o.error.empty() ? o.error
                                              : fmt::format("ran no test (exit {}): {}", o.exit_code, o.stderr_data.substr(0, 200))));
  }
  return cases;
}

}  // namespace smolvm_check
