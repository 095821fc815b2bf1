// smolvm-check mutate's parts that need no mutant build: the table is read strictly, verdicts
// and the score follow from the cases, the reports say what they must; and the command refuses
// a smolbox that is no mutant build.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include "battery/catalog.h"
#include "check_runner.h"
#include "mutate/mutant_guest.h"
#include "mutate/mutant_table.h"
#include "mutate/mutant_tests.h"
#include "mutate/mutation_report.h"
#include "test_support.h"

namespace smolvm_check {
namespace {

const Catalog& TheCatalog() {
  static Catalog catalog = *LoadCatalog(std::string(SMOLVM_CHECK_SOURCE_DIR) + "/adversarial/catalog.json");
  return catalog;
}

std::string ParseError(const std::string& text) {
  auto table = ParseMutantTable(text, TheCatalog());
  return table ? "" : table.error().ToString();
}

TEST(MutantTable, the_shipped_table_loads_against_the_shipped_catalog) {
  auto table = LoadMutantTable(std::string(SMOLVM_CHECK_SOURCE_DIR) + "/conformance/mutants.json", TheCatalog());
  ASSERT_TRUE(table) << table.error().ToString();
  EXPECT_GE(table->mutants.size(), 20u);
}

TEST(MutantTable, bad_rows_are_errors_naming_the_field) {
  const std::string head = R"({"version": 1, "mutants": [)";
  EXPECT_NE(ParseError(head + R"({"name": "x", "backends": ["ns"], "categories": ["cpu"], "extra": 1}]})").find("mutants[0]: unknown field \"extra\""), std::string::npos);
  EXPECT_NE(ParseError(head + R"({"name": "x", "backends": ["kvm"], "categories": ["cpu"]}]})").find("mutants[0].backends[0]"), std::string::npos);
  EXPECT_NE(ParseError(head + R"({"name": "x", "backends": ["ns"], "categories": ["cpus"]}]})").find("\"cpus\" is no category"), std::string::npos);
  EXPECT_NE(ParseError(head + R"({"name": "x", "backends": ["ns"], "categories": []}]})").find("neither tests nor defence_in_depth"), std::string::npos);
  EXPECT_NE(ParseError(head + R"({"name": "x", "backends": ["ns"], "categories": [], "tests": {"binary": "../sh", "filter": "*"}}]})").find("mutants[0].tests.binary: \"../sh\" is no file name"), std::string::npos);
  EXPECT_NE(ParseError(head + R"({"name": "x", "backends": ["ns"], "categories": [], "tests": {"binary": "t", "filter": ""}}]})").find("mutants[0].tests.filter: is empty"), std::string::npos);
  EXPECT_NE(ParseError(head + R"({"name": "x", "backends": ["ns"], "categories": [], "tests": {"binary": "t", "filter": "*", "x": 1}}]})").find("unknown field \"x\""), std::string::npos);
  EXPECT_EQ(ParseError(head + R"({"name": "x", "backends": ["ns"], "categories": [], "tests": {"binary": "t", "filter": "A.*"}}]})"), "");
  EXPECT_NE(ParseError(head + R"({"name": "x", "backends": ["ns"], "categories": ["cpu"]}, {"name": "x", "backends": ["ns"], "categories": ["cpu"]}]})").find("given twice"), std::string::npos);
  EXPECT_NE(ParseError(R"({"version": 2, "mutants": []})").find("version"), std::string::npos);
  EXPECT_NE(ParseError("[").find("malformed"), std::string::npos);
}

CaseReport Case(const std::string& id, Verdict verdict) {
  CaseReport c;
  c.id = id;
  c.verdict = verdict;
  c.wall_ms = 100;
  return c;
}

TEST(MutationReport, a_failed_case_kills_unless_it_failed_without_the_mutant_too) {
  Mutant m{"seccomp", {"ns"}, {"privilege"}, "", {}};
  auto killed = Judge(m, {Case("a", Verdict::kPass), Case("b", Verdict::kFail)}, {});
  EXPECT_EQ(killed.verdict, MutantVerdict::kKilled);
  EXPECT_EQ(killed.killers, std::vector<std::string>{"b"});
  EXPECT_EQ(Judge(m, {Case("a", Verdict::kPass), Case("b", Verdict::kFail)}, {"b"}).verdict, MutantVerdict::kSurvived);
  EXPECT_EQ(Judge(m, {Case("a", Verdict::kError)}, {}).verdict, MutantVerdict::kStillborn);
  Mutant documented{"x", {"ns"}, {"cpu"}, "the pids cgroup stops it first", {}};
  EXPECT_EQ(Judge(documented, {Case("a", Verdict::kPass)}, {}).verdict, MutantVerdict::kDefenceInDepth);
}

TEST(MutationReport, the_score_counts_survivors_against_all_but_defence_in_depth) {
  MutationReport report;
  report.sandbox = "smolbox:ns";
  report.results.push_back(Judge({"a", {"ns"}, {"cpu"}, "", {}}, {Case("x", Verdict::kFail)}, {}));
  report.results.push_back(Judge({"b", {"ns"}, {"cpu"}, "", {}}, {Case("x", Verdict::kPass)}, {}));
  report.results.push_back(Judge({"c", {"ns"}, {"cpu"}, "why", {}}, {Case("x", Verdict::kPass)}, {}));
  EXPECT_DOUBLE_EQ(MutationScore(report), 50.0);
  EXPECT_EQ(Survivors(report), 1u);
  std::string md = ToMarkdown(report);
  EXPECT_NE(md.find("mutation score 50%"), std::string::npos) << md;
  EXPECT_NE(md.find("| `a` | killed | 1 | x |"), std::string::npos) << md;
  EXPECT_NE(md.find("| `c` | defence in depth | 1 | why |"), std::string::npos) << md;
  std::string xml = ToJunitXml(report);
  EXPECT_NE(xml.find("tests=\"3\" failures=\"1\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("name=\"b\" time=\"0.1\"><failure message=\"survived"), std::string::npos) << xml;
  EXPECT_EQ(ToJson(report)["mutants"][0]["killers"][0], "x");
}

// A stand-in for a mutant build's gtest binary: it prints gtest's result lines, one of them
// named after SMOLBOX_DISABLE, and exits as the script says.
std::string FakeTests(const smolbox::testing::TempDir& dir, const std::string& body) {
  smolbox::testing::WriteFile(dir.path() + "/tests", "#!/bin/sh\n" + body);
  EXPECT_EQ(chmod((dir.path() + "/tests").c_str(), 0755), 0);
  return dir.path();
}

TEST(MutantTests, each_test_is_a_case_and_a_crash_or_a_silent_binary_is_told) {
  smolbox::testing::TempDir dir("mutant-tests");
  std::string bin = FakeTests(dir, R"sh(echo "[ RUN      ] A.ok"
echo "[       OK ] A.ok (3 ms)"
echo "[  FAILED  ] A.off_$SMOLBOX_DISABLE (4 ms)"
echo "[  FAILED  ] 1 test, listed below:"
echo "[  FAILED  ] A.off_$SMOLBOX_DISABLE"
exit 1
)sh");
  auto cases = RunMutantTests(bin, {"tests", "A.*"}, "image_limits");
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[0].id, "A.ok");
  EXPECT_EQ(cases[0].verdict, Verdict::kPass);
  EXPECT_EQ(cases[1].id, "A.off_image_limits");
  EXPECT_EQ(cases[1].verdict, Verdict::kFail);
  EXPECT_EQ(cases[1].wall_ms, 4);
  Mutant m{"image_limits", {"ns"}, {}, "", MutantTests{"tests", "A.*"}};
  EXPECT_EQ(Judge(m, cases, {}).killers, std::vector<std::string>{"A.off_image_limits"});

  FakeTests(dir, "echo '[       OK ] A.ok (3 ms)'\nkill -SEGV $$\n");
  cases = RunMutantTests(bin, {"tests", "A.*"}, "");
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[1].verdict, Verdict::kFail) << "a binary that crashed after its passes";
  EXPECT_EQ(cases[1].reason, "killed by signal 11");

  FakeTests(dir, "echo 'no switch of that name' >&2\nexit 1\n");
  cases = RunMutantTests(bin, {"tests", "A.*"}, "");
  ASSERT_EQ(cases.size(), 1u);
  EXPECT_EQ(cases[0].verdict, Verdict::kError);
  EXPECT_EQ(cases[0].reason, "ran no test (exit 1): no switch of that name\n");
  EXPECT_EQ(Judge(m, cases, {}).verdict, MutantVerdict::kStillborn);
}

TEST(MutateCommand, refuses_a_smolbox_that_is_no_mutant_build) {
  auto run = RunCheck({"mutate", "--sandbox", "smolbox:ns", "--smolbox", std::string(SMOLBOX_BIN_DIR) + "/smolbox"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("is no mutant build"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("smolbox 0."), std::string::npos) << "the reason quotes its --version: " << run.err;
  auto missing = RunCheck({"mutate", "--sandbox", "smolbox:ns", "--smolbox", "/nonexistent/smolbox"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--smolbox: /nonexistent/smolbox cannot be run: "), std::string::npos) << missing.err;
  smolbox::testing::TempDir dir("mutate-test");
  std::string mute = dir.path() + "/smolbox";
  smolbox::testing::WriteFile(mute, "#!/bin/sh\nexit 3\n");
  ASSERT_EQ(chmod(mute.c_str(), 0755), 0);
  auto silent = RunCheck({"mutate", "--sandbox", "smolbox:ns", "--smolbox", mute});
  EXPECT_EQ(silent.exit_code, 2);
  EXPECT_NE(silent.err.find("its --version printed nothing (exit 3)"), std::string::npos) << silent.err;
  auto peer = RunCheck({"mutate", "--sandbox", "bwrap"});
  EXPECT_EQ(peer.exit_code, 2);
  EXPECT_NE(peer.err.find("mutate runs against smolbox:ns or smolbox:vm-tcg"), std::string::npos) << peer.err;
}

// A guest whose agent is not the mutant's would keep the guest's switches on: every vm mutant
// would then look like a survivor, so mutate refuses it.
TEST(MutantGuest, accepts_only_a_guest_built_from_the_mutants_agent) {
  smolbox::testing::TempDir dir("mutant-guest");
  const std::string agent = dir.path() + "/bin/smolbox-agent";
  ASSERT_EQ(mkdir((dir.path() + "/bin").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((dir.path() + "/guest").c_str(), 0755), 0);
  // build-guest digests the agent and then the egress setup: "ab" + "c" is SHA-256's "abc".
  smolbox::testing::WriteFile(agent, "ab");
  smolbox::testing::WriteFile(dir.path() + "/bin/smolbox-egress-setup", "c");
  const std::string guest = dir.path() + "/guest";
  auto error = [&] {
    auto checked = CheckMutantGuest(guest, agent);
    return checked ? std::string() : checked.error().ToString();
  };
  EXPECT_NE(error().find("--guest-dir: " + guest + " has no manifest.json: build it with scripts/build-guest"), std::string::npos) << error();
  smolbox::testing::WriteFile(guest + "/manifest.json", R"({"agent_sha256": 7})");
  EXPECT_NE(error().find("names no agent_sha256"), std::string::npos) << error();
  smolbox::testing::WriteFile(guest + "/manifest.json", R"({"agent_sha256": "115ab90588a7251e5fb432f200391357ba710dca61a65a037539cb569d221d5c"})");
  EXPECT_NE(error().find("holds another agent than " + agent), std::string::npos) << error();
  smolbox::testing::WriteFile(guest + "/manifest.json", R"({"agent_sha256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"})");
  EXPECT_EQ(error(), "");
  ASSERT_EQ(unlink((dir.path() + "/bin/smolbox-egress-setup").c_str()), 0);
  EXPECT_NE(error().find("--smolbox: the mutant's agent: "), std::string::npos) << error();
}

}  // namespace
}  // namespace smolvm_check
