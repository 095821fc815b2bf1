// `smolvm-check bench`: start-up, transform and egress times of sandboxes, side by side on one
// host.
//
// A cold sample is one whole sandbox invocation of a functional case of the battery, launched
// and timed by the same safety net as `run`, so that each row pays the same harness cost and
// the null sandbox (the bare interpreter) is a fair floor. A warm sample is one `smolbox exec`
// into a sandbox created before the runs, against the bare interpreter started the same way.
// An egress sample is what the workload measured of its own fetches on the test internet
// (test_internet.h), through the sandbox's egress, against the same fetch with no sandbox.
// Runs interleave: run 1 of every row, then run 2, so that drift in the host's load spreads
// over all rows alike.
//
//   BenchPlan plan{.sandboxes = {"null", "smolbox:ns"}, .workloads = *BenchWorkloads(catalog, "python", {}), .runs = 10};
//   BenchReport report = RunBench(plan, profiles_dir, catalog.directory, on_sample);
//   WriteBenchReports(report, "reports/bench");   // bench.json, bench.md, bench.svg
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "battery/catalog.h"
#include "bench/api_bench.h"
#include "launch/profile.h"
#include "smolbox/error.h"

namespace smolvm_check {

// A bench workload: a functional case of the catalog, possibly with a bigger input.
struct Workload {
  std::string name;  // "python hello", "python hello, warm exec", "python csv->json 10 MB"
  Case c;
  // Timed as an exec into a sandbox created beforehand (warm_bench.h), on the sandboxes that
  // have a warm path; otherwise each sample is a whole cold run.
  bool warm = false;
  // A sample is the wall time of the run in ms, or, given a measure, the number the workload
  // printed where the measure's one group matches, in unit: the egress workloads time their
  // own fetches, so that the sandbox's start-up is not in the figure.
  std::string measure;
  std::string unit = "ms";
  // Or timed as a request to smolbox serve (api_bench.h), on smolbox's sandboxes; null runs the
  // same command bare.
  std::optional<ApiPath> api;
};

// Which workloads: every language has its hello cold and warm; Python adds the 10 MB
// CSV-to-JSON transform, the egress fetches (a 1 KiB GET, a 100 MB download) on the test
// internet, and print(42) through the HTTP API, each where asked.
struct WorkloadChoice {
  bool transform = true;
  bool egress = true;
  bool api = true;
};
Expected<std::vector<Workload>> BenchWorkloads(const Catalog& catalog, const std::string& lang,
                                               const WorkloadChoice& choice);

struct BenchPlan {
  std::vector<std::string> sandboxes;  // the first is the baseline ratios are taken against
  std::vector<Workload> workloads;
  int runs = 10;
  // With the API rows: after the runs, a burst of this many runs at once (api_bench.h) to each
  // API sandbox's servers, without a pool and with one; 0 for none.
  int burst = 0;
};

struct BenchRow {
  std::string sandbox;
  std::string workload;
  std::string unit = "ms";  // the workload's
  std::vector<int64_t> samples;  // of the runs that passed, in run order
  std::vector<std::string> failures;  // why the others did not count
  int64_t p50 = 0, p90 = 0, p99 = 0, max = 0;
  std::optional<double> per_second;  // a burst's: its requests over its wall time
  double ratio = 0;  // p50 over the baseline's p50 for the same workload; 0 when unknown
  std::optional<int64_t> delta;  // p50 minus the baseline's p50; none when unknown
};

struct BenchReport {
  nlohmann::json host;
  std::string started;
  int runs = 0;
  std::string baseline;
  std::vector<BenchRow> rows;
};

// The nearest-rank percentile (p in 0..100) of samples; 0 for none.
int64_t Percentile(std::vector<int64_t> samples, int p);
// Fills p50, p90, p99, max, ratio and delta from the samples.
void Summarize(BenchReport& report);

BenchReport RunBench(const BenchPlan& plan, const std::vector<Profile>& profiles,
                     const std::string& payload_dir, const std::string& work_root,
                     const std::function<void(const std::string&)>& on_sample);

nlohmann::json ToJson(const BenchReport& report);
std::string ToMarkdown(const BenchReport& report);
// A horizontal bar chart of p50 per row, with the p90 as a whisker, on a log scale.
std::string ToSvg(const BenchReport& report);
Expected<void> WriteBenchReports(const BenchReport& report, const std::string& dir);

}  // namespace smolvm_check
