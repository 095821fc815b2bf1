// smolvm-check bench: its statistics and reports, and real runs on the bare interpreter and
// smolbox's namespace sandbox.
#include "bench/bench.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "check_runner.h"
#include "launch/subprocess.h"
#include "test_support.h"

namespace smolvm_check {
namespace {

const std::string kCatalog = std::string(SMOLVM_CHECK_SOURCE_DIR) + "/adversarial/catalog.json";

// The persistent sandboxes a bench made for its warm rows (bench-...) or its API servers made
// (api-...), from smolbox ls.
std::set<std::string> BenchSandboxes(const std::string& prefix = "bench-") {
  std::set<std::string> names;
  auto ls = RunCaptured({std::string(SMOLBOX_BIN_DIR) + "/smolbox", "ls", "--json"});
  if (!ls) return names;
  auto list = nlohmann::json::parse(ls->out, nullptr, false);
  if (!list.is_array()) return names;
  for (const auto& box : list) {
    std::string name = box.value("name", "");
    if (name.starts_with(prefix)) names.insert(name);
  }
  return names;
}

TEST(Percentile, takes_the_nearest_rank) {
  std::vector<int64_t> tens = {100, 10, 90, 20, 80, 30, 70, 40, 60, 50};
  EXPECT_EQ(Percentile(tens, 50), 50);
  EXPECT_EQ(Percentile(tens, 90), 90);
  EXPECT_EQ(Percentile(tens, 100), 100);
  EXPECT_EQ(Percentile({7}, 90), 7);
  EXPECT_EQ(Percentile({}, 50), 0);
}

BenchRow Row(std::string sandbox, std::string workload, std::string unit, std::vector<int64_t> samples,
             std::vector<std::string> failures = {}) {
  BenchRow row;
  row.sandbox = std::move(sandbox);
  row.workload = std::move(workload);
  row.unit = std::move(unit);
  row.samples = std::move(samples);
  row.failures = std::move(failures);
  return row;
}

BenchReport Sample() {
  BenchReport r;
  r.runs = 3;
  r.baseline = "null";
  r.started = "2026-11-30T12:00:00Z";
  r.rows = {Row("null", "python hello", "ms", {20, 18, 22}),
            Row("smolbox:ns", "python hello", "ms", {40, 44, 36}),
            Row("bwrap", "python hello", "ms", {}, {"run 1: fail status timeout"}),
            Row("null", "python egress GET 1 KiB", "µs", {700, 650, 690}),
            Row("smolbox:ns", "python egress GET 1 KiB", "µs", {1150, 1100, 1240})};
  std::vector<int64_t> burst;
  for (int64_t ms = 100; ms <= 10000; ms += 100) burst.push_back(ms);
  r.rows.push_back(Row("smolbox:ns", "python echo, API burst of 100", "ms", burst));
  r.rows.back().per_second = 9.75;
  Summarize(r);
  return r;
}

TEST(Summarize, gives_percentiles_and_the_ratio_to_the_baseline_of_the_same_workload) {
  BenchReport r = Sample();
  EXPECT_EQ(r.rows[0].p50, 20);
  EXPECT_DOUBLE_EQ(r.rows[0].ratio, 1.0);
  EXPECT_EQ(r.rows[1].p50, 40);
  EXPECT_EQ(r.rows[1].p90, 44);
  EXPECT_EQ(r.rows[1].max, 44);
  EXPECT_DOUBLE_EQ(r.rows[1].ratio, 2.0);
  EXPECT_EQ(r.rows[1].delta, 20);
  EXPECT_EQ(r.rows[2].ratio, 0) << "no passing run, no ratio";
  EXPECT_EQ(r.rows[2].delta, std::nullopt);
  EXPECT_EQ(r.rows[4].p50, 1150);
  EXPECT_EQ(r.rows[4].delta, 460) << "in the row's own unit, against the same workload's baseline";
  EXPECT_EQ(r.rows[5].p50, 5000);
  EXPECT_EQ(r.rows[5].p99, 9900);
}

TEST(BenchReports, render_the_table_the_chart_and_the_failures) {
  BenchReport r = Sample();
  std::string md = ToMarkdown(r);
  EXPECT_NE(md.find("| python hello | smolbox:ns | ms | 40 | 44 | 44 | 2.00x | +20 | 0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| python hello | bwrap | ms | - | - | - | - | - | 1 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| python egress GET 1 KiB | smolbox:ns | µs | 1150 | 1240 | 1240 | 1.67x | +460 | 0 |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("run 1: fail status timeout"), std::string::npos) << md;
  EXPECT_NE(md.find("- python echo, API burst of 100 on smolbox:ns: 100 answered, 9.8 per second; p50 5000 ms, "
                    "p99 9900 ms, 0 failed"),
            std::string::npos)
      << md;
  std::string svg = ToSvg(r);
  EXPECT_TRUE(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\"")) << svg;
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '\n') > 3, true);
  size_t rects = 0;
  for (size_t at = svg.find("<rect"); at != std::string::npos; at = svg.find("<rect", at + 1)) ++rects;
  EXPECT_EQ(rects, 3u) << "a bar for each timed row with a passing run; the µs rows are not times of a run";
  EXPECT_NE(svg.find("no passing run"), std::string::npos);
  auto j = ToJson(r);
  EXPECT_EQ(j["rows"][1]["samples"], (std::vector<int64_t>{40, 44, 36}));
  EXPECT_EQ(j["rows"][1]["unit"], "ms");
  EXPECT_EQ(j["rows"][1]["ratio_to_baseline"], 2.0);
  EXPECT_EQ(j["rows"][1]["delta_to_baseline"], 20);
  EXPECT_TRUE(j["rows"][2]["delta_to_baseline"].is_null());
  EXPECT_EQ(j["rows"][4]["unit"], "µs");
  EXPECT_EQ(j["rows"][5]["p99"], 9900);
  EXPECT_EQ(j["rows"][5]["per_second"], 9.75);
  EXPECT_FALSE(j["rows"][4].contains("per_second"));
}

TEST(BenchWorkloads, the_transform_converts_10_mb_of_csv) {
  auto catalog = LoadCatalog(kCatalog);
  ASSERT_TRUE(catalog) << catalog.error().ToString();
  auto workloads = BenchWorkloads(*catalog, "python", {.transform = true, .egress = false, .api = false});
  ASSERT_TRUE(workloads) << workloads.error().ToString();
  ASSERT_EQ(workloads->size(), 3u);
  EXPECT_FALSE((*workloads)[0].warm);
  EXPECT_TRUE((*workloads)[1].warm);
  const Case& transform = (*workloads)[2].c;
  size_t csv = 0;
  for (const auto& m : transform.mounts) {
    if (m.files.contains("data.csv")) csv = m.files.at("data.csv").size();
  }
  EXPECT_GE(csv, 10u << 20);
  ASSERT_EQ(transform.expect.stdout_contains.size(), 1u);
  EXPECT_TRUE(transform.expect.stdout_contains[0].starts_with("CONVERTED ")) << transform.expect.stdout_contains[0];
  auto js = BenchWorkloads(*catalog, "js", {});
  ASSERT_TRUE(js);
  EXPECT_EQ(js->size(), 2u) << "the transform, the egress fetches and the API rows are Python's";
}

TEST(BenchWorkloads, the_api_rows_are_a_pooled_run_a_run_of_its_own_and_an_exec) {
  auto catalog = LoadCatalog(kCatalog);
  ASSERT_TRUE(catalog) << catalog.error().ToString();
  auto workloads = BenchWorkloads(*catalog, "python", {.transform = false, .egress = false, .api = true});
  ASSERT_TRUE(workloads) << workloads.error().ToString();
  ASSERT_EQ(workloads->size(), 5u);
  EXPECT_EQ((*workloads)[2].api, ApiPath::kPooledRun);
  EXPECT_EQ((*workloads)[3].api, ApiPath::kRun);
  EXPECT_EQ((*workloads)[4].api, ApiPath::kExec);
  EXPECT_EQ((*workloads)[2].name, "python print(42), API run, pooled");
  for (size_t i = 0; i < 2; ++i) EXPECT_FALSE((*workloads)[i].api) << (*workloads)[i].name;
}

TEST(BenchWorkloads, the_egress_fetches_are_200_gets_and_100_mb_measured_by_the_workload) {
  auto catalog = LoadCatalog(kCatalog);
  ASSERT_TRUE(catalog) << catalog.error().ToString();
  auto workloads = BenchWorkloads(*catalog, "python", {.transform = false, .egress = true, .api = false});
  ASSERT_TRUE(workloads) << workloads.error().ToString();
  ASSERT_EQ(workloads->size(), 4u);
  const Workload& get = (*workloads)[2];
  const Workload& download = (*workloads)[3];
  EXPECT_EQ(get.name, "python egress GET 1 KiB");
  EXPECT_EQ(get.unit, "µs");
  EXPECT_EQ(get.c.args.back(), "200");
  EXPECT_EQ(get.c.args[2], "http://api.allowed.test/bytes/1024");
  EXPECT_EQ(download.unit, "kB/s");
  EXPECT_EQ(download.c.args.back(), "http://api.allowed.test/bytes/100000000");
  for (const Workload* w : {&get, &download}) {
    ASSERT_TRUE(w->c.egress.has_value()) << w->name;
    EXPECT_EQ(w->c.egress->allow_host, (std::vector<std::string>{"api.allowed.test"}));
    EXPECT_FALSE(w->measure.empty());
  }
}

TEST(BenchCommand, times_the_bare_interpreter_and_the_namespace_sandbox_side_by_side) {
  smolbox::testing::TempDir scratch("smolvm-check-bench-test");
  std::string dir = scratch.path() + "/reports";
  auto before = BenchSandboxes();
  auto run = RunCheck({"bench", "--sandbox", "null", "--sandbox", "smolbox:ns", "--lang", "python", "--runs", "3",
                       "--no-egress", "--burst", "24", "--json", "--report-dir", dir});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  ASSERT_TRUE(run.report.is_object()) << run.out;
  EXPECT_EQ(run.report["baseline"], "null");
  ASSERT_EQ(run.report["rows"].size(), 16u) << "python hello cold and warm, the transform, the three API rows, "
                                                "and the two bursts, on two sandboxes";
  for (const auto& row : run.report["rows"]) {
    // A burst's every request answered with its own token; the rest one sample per run.
    bool burst = row.contains("per_second");
    EXPECT_EQ(row["samples"].size(), burst ? 24u : 3u) << row.dump();
    EXPECT_EQ(row["unit"], "ms");
    EXPECT_GT(row["p50"].get<int64_t>(), 0);
    if (burst) {
      EXPECT_GT(row["per_second"].get<double>(), 0) << row.dump();
    }
  }
  EXPECT_EQ(run.report["rows"][12]["workload"], "python echo, API burst of 24");
  EXPECT_EQ(run.report["rows"][15]["workload"], "python echo, API burst of 24, pooled");
  EXPECT_EQ(run.report["rows"][15]["sandbox"], "smolbox:ns");
  EXPECT_EQ(run.report["rows"][2]["workload"], "python hello, warm exec");
  EXPECT_EQ(run.report["rows"][3]["sandbox"], "smolbox:ns");
  // Each sandbox row's ratio is its p50 over the bare interpreter's for the same workload. How
  // large it is is the bench's finding, not this test's: three runs are within each other's noise.
  // A pooled sample that the pool did not serve would be a failure, and no sample.
  EXPECT_EQ(run.report["rows"][7]["workload"], "python print(42), API run, pooled");
  EXPECT_EQ(run.report["rows"][7]["sandbox"], "smolbox:ns");
  for (int base : {0, 2, 4, 6, 8, 10, 12, 14}) {
    const auto& bare = run.report["rows"][base];
    const auto& boxed = run.report["rows"][base + 1];
    EXPECT_EQ(bare["ratio_to_baseline"], 1.0);
    EXPECT_EQ(boxed["workload"], bare["workload"]);
    EXPECT_DOUBLE_EQ(boxed["ratio_to_baseline"].get<double>(),
                     boxed["p50"].get<double>() / bare["p50"].get<double>()) << boxed.dump();
  }
  for (const char* file : {"bench.json", "bench.md", "bench.svg"}) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + file)) << file;
  }
  EXPECT_EQ(BenchSandboxes(), before) << "the warm sandbox is removed at the end";
  EXPECT_TRUE(BenchSandboxes("api-").empty()) << "the API servers' sandboxes outlived the bench";
}

// The egress issue's figures, in one run against the same fetch with no sandbox. Their size is
// the bench's finding (docs/performance.md), not this test's.
TEST(BenchCommand, times_the_bare_fetch_and_the_fetch_through_the_gateway_side_by_side) {
  if (geteuid() != 0) GTEST_SKIP() << "the test internet needs root";
  auto run = RunCheck({"bench", "--sandbox", "null", "--sandbox", "smolbox:ns", "--sandbox", "bwrap", "--lang",
                       "python", "--no-transform", "--runs", "2", "--json"});
  ASSERT_TRUE(run.report.is_object()) << run.out << run.err;
  std::map<std::string, nlohmann::json> egress;
  for (const auto& row : run.report["rows"]) {
    std::string workload = row["workload"];
    if (workload.find("egress") != std::string::npos) egress[workload + " | " + row["sandbox"].get<std::string>()] = row;
  }
  std::vector<std::string> names;
  for (const auto& [name, row] : egress) names.push_back(name);
  // bwrap's profile cannot give a policy: no egress row for it.
  EXPECT_EQ(names, (std::vector<std::string>{
                       "python egress GET 1 KiB | null", "python egress GET 1 KiB | smolbox:ns",
                       "python egress download 100 MB | null", "python egress download 100 MB | smolbox:ns"}));
  for (const auto& [name, row] : egress) {
    EXPECT_EQ(row["failures"].size(), 0u) << name << ": " << row.dump();
    EXPECT_EQ(row["samples"].size(), 2u) << name;
    EXPECT_GT(row["p50"].get<int64_t>(), 0) << name;
    EXPECT_EQ(row["unit"], name.find("GET") != std::string::npos ? "µs" : "kB/s") << name;
  }
  const auto& boxed = egress["python egress GET 1 KiB | smolbox:ns"];
  const auto& bare = egress["python egress GET 1 KiB | null"];
  EXPECT_EQ(boxed["delta_to_baseline"].get<int64_t>(), boxed["p50"].get<int64_t>() - bare["p50"].get<int64_t>());
}

TEST(BenchCommand, sigterm_ends_it_early_and_removes_its_warm_sandboxes_and_api_servers) {
  auto before = BenchSandboxes();
  pid_t pid = fork();
  if (pid == 0) {
    int null_fd = open("/dev/null", O_WRONLY);
    dup2(null_fd, 1);
    dup2(null_fd, 2);
    std::string check = std::string(SMOLBOX_BIN_DIR) + "/smolvm-check";
    execl(check.c_str(), "smolvm-check", "bench", "--sandbox", "null", "--sandbox", "smolbox:ns", "--lang", "python",
          "--no-transform", "--runs", "500", nullptr);
    _exit(127);
  }
  // Until its warm sandbox exists, then a moment into the runs.
  for (int i = 0; i < 100 && BenchSandboxes() == before; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_NE(BenchSandboxes(), before) << "the warm sandbox never appeared";
  // And its API servers' pools.
  for (int i = 0; i < 300 && BenchSandboxes("api-").empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(BenchSandboxes("api-").empty()) << "the API servers' pools never appeared";
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM) << status;
  EXPECT_EQ(BenchSandboxes(), before);
  EXPECT_TRUE(BenchSandboxes("api-").empty()) << "the API servers' sandboxes outlived the bench";
}

// A prewarm variant has warm rows only: its cold run would be smolbox:vm-tcg's.
TEST(BenchCommand, a_prewarm_variant_gets_warm_rows_only_and_removes_its_sandbox) {
  auto before = BenchSandboxes();
  auto run = RunCheck({"bench", "--sandbox", "null", "--sandbox", "smolbox:vm-tcg-prewarm", "--lang", "python", "--runs",
                       "3", "--no-transform", "--no-egress", "--no-api", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  std::vector<std::string> rows;
  for (const auto& row : run.report["rows"]) {
    rows.push_back(row["workload"].get<std::string>() + " | " + row["sandbox"].get<std::string>());
    EXPECT_EQ(row["samples"].size(), 3u) << row.dump();
  }
  EXPECT_EQ(rows, (std::vector<std::string>{"python hello | null", "python hello, warm exec | null",
                                            "python hello, warm exec | smolbox:vm-tcg-prewarm"}));
  EXPECT_EQ(BenchSandboxes(), before) << "the warm sandbox is removed at the end";
}

class BenchPeer : public ::testing::TestWithParam<const char*> {};

TEST_P(BenchPeer, a_peer_without_a_warm_path_gets_cold_rows_only) {
  // runsc's profile runs on host paths as null does; it must not pass for the bare interpreter.
  std::string peer = GetParam();
  auto run = RunCheck({"bench", "--sandbox", "null", "--sandbox", peer, "--lang", "js", "--runs", "1", "--json"});
  if (run.exit_code == 2 && run.err.find(peer) != std::string::npos) {
    GTEST_SKIP() << peer << " cannot run here: " << run.err;
  }
  ASSERT_TRUE(run.report.is_object()) << run.out << run.err;
  std::vector<std::string> rows;
  for (const auto& row : run.report["rows"]) rows.push_back(row["workload"].get<std::string>() + " | " + row["sandbox"].get<std::string>());
  EXPECT_EQ(rows, (std::vector<std::string>{"node hello | null", "node hello | " + peer, "node hello, warm exec | null"}));
}

INSTANTIATE_TEST_SUITE_P(Installed, BenchPeer, ::testing::Values("bwrap", "runsc", "firejail"));

TEST(BenchCommand, a_sandbox_it_cannot_run_is_bad_input) {
  auto smolvm = RunCheck({"bench", "--sandbox", "null", "--sandbox", "smolvm", "--runs", "1", "--no-transform"});
  EXPECT_EQ(smolvm.exit_code, 2);
  EXPECT_NE(smolvm.err.find("--sandbox smolvm: validated for syntax only here"), std::string::npos) << smolvm.err;
  auto unknown = RunCheck({"bench", "--sandbox", "smolbox:qemu", "--runs", "1"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("unknown smolbox backend"), std::string::npos) << unknown.err;
}

}  // namespace
}  // namespace smolvm_check
