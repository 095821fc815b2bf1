#include "bench/bench.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>

#include <fmt/format.h>

#include "battery/runner.h"
#include "bench/warm_bench.h"
#include "launch/interrupt.h"

namespace smolvm_check {
namespace {

using json = nlohmann::json;

constexpr int64_t kTransformBytes = 10 << 20;
// Bounds for the transform, generous enough for an emulated VM; they bound, they do not time.
constexpr int64_t kTransformTimeoutMs = 600000;
constexpr int64_t kTransformStorageMiB = 256;
constexpr int64_t kTransformMemoryMiB = 1024;
// The egress issue's figures: a 1 KiB GET (the median of many, each on its own connection) and
// a 100 MB download.
constexpr int kGetCount = 200;
constexpr int64_t kDownloadBytes = 100'000'000;
constexpr int64_t kEgressTimeoutMs = 300000;

const Case* FindCase(const Catalog& catalog, const std::string& id) {
  for (const auto& c : catalog.cases) {
    if (c.id == id) return &c;
  }
  return nullptr;
}

// The catalog's CSV-to-JSON case, on 10 MB of rows instead of two.
Expected<Workload> TransformWorkload(const Catalog& catalog) {
  const Case* base = FindCase(catalog, "functional.csv_to_json.python");
  if (base == nullptr) return std::unexpected(Error{"catalog", "has no functional.csv_to_json.python", 0});
  Case c = *base;
  std::string csv = "name,qty,price\n";
  int64_t rows = 0;
  while (static_cast<int64_t>(csv.size()) < kTransformBytes) {
    csv += fmt::format("item {},{},{}.{:02}\n", rows, rows % 97, rows % 1000, rows % 100);
    ++rows;
  }
  for (auto& m : c.mounts) {
    if (m.files.contains("data.csv")) m.files["data.csv"] = std::move(csv);
  }
  c.expect.outputs.clear();
  c.expect.stdout_contains = {fmt::format("CONVERTED {} rows", rows)};
  c.expect.max_wall_ms = 0;
  c.limits["timeout_ms"] = kTransformTimeoutMs;
  c.limits["storage_mib"] = kTransformStorageMiB;
  c.limits["memory_mib"] = kTransformMemoryMiB;
  return Workload{"python csv->json 10 MB", std::move(c), false, "", "ms", std::nullopt};
}

// The catalog's timed egress case, with the bench's count or size, measured by the workload.
Expected<Workload> EgressWorkload(const Catalog& catalog, const std::string& id, std::string name,
                                  std::string last_arg, std::string measure, std::string unit) {
  const Case* base = FindCase(catalog, id);
  if (base == nullptr) return std::unexpected(Error{"catalog", "has no " + id, 0});
  Case c = *base;
  c.args.back() = std::move(last_arg);
  c.expect.stdout_contains = {"CONTROL ok"};
  c.expect.max_wall_ms = 0;
  c.limits["timeout_ms"] = kEgressTimeoutMs;
  return Workload{std::move(name), std::move(c), false, std::move(measure), std::move(unit), std::nullopt};
}

Expected<std::vector<Workload>> EgressWorkloads(const Catalog& catalog) {
  SMOLBOX_ASSIGN_OR_RETURN(auto get, EgressWorkload(catalog, "egress.timed_get.python", "python egress GET 1 KiB",
                                                    std::to_string(kGetCount), "GET_P50_US (\\d+)", "µs"));
  SMOLBOX_ASSIGN_OR_RETURN(
      auto download,
      EgressWorkload(catalog, "egress.timed_download.python", "python egress download 100 MB",
                     fmt::format("http://api.allowed.test/bytes/{}", kDownloadBytes), "DOWNLOAD_KBPS (\\d+)", "kB/s"));
  return std::vector<Workload>{std::move(get), std::move(download)};
}

// The number the measure's group matched in what the workload printed.
Expected<int64_t> Measured(const Workload& workload, const std::string& printed) {
  std::smatch match;
  if (!std::regex_search(printed, match, std::regex(workload.measure)) || match.size() != 2) {
    return std::unexpected(Error{"measure", fmt::format("/{}/ does not match what the workload printed", workload.measure), 0});
  }
  return std::stoll(match[1].str());
}

std::string Cell(const BenchRow& row, int64_t value) {
  return row.samples.empty() ? "-" : fmt::format("{}", value);
}

std::string Delta(const BenchRow& row) { return row.delta ? fmt::format("{:+}", *row.delta) : "-"; }

std::string Ratio(const BenchRow& row) { return row.ratio > 0 ? fmt::format("{:.2f}x", row.ratio) : "-"; }

}  // namespace

Expected<std::vector<Workload>> BenchWorkloads(const Catalog& catalog, const std::string& lang,
                                               const WorkloadChoice& choice) {
  std::string id = lang == "js" ? "functional.hello.js" : "functional.hello.python";
  const Case* hello = FindCase(catalog, id);
  if (hello == nullptr) return std::unexpected(Error{"catalog", "has no " + id, 0});
  std::string name = lang == "js" ? "node hello" : "python hello";
  std::vector<Workload> workloads = {{name, *hello, false, "", "ms", std::nullopt},
                                     {name + ", warm exec", *hello, true, "", "ms", std::nullopt}};
  if (choice.transform && lang == "python") {
    SMOLBOX_ASSIGN_OR_RETURN(auto transform, TransformWorkload(catalog));
    workloads.push_back(std::move(transform));
  }
  if (choice.egress && lang == "python") {
    SMOLBOX_ASSIGN_OR_RETURN(auto egress, EgressWorkloads(catalog));
    workloads.insert(workloads.end(), egress.begin(), egress.end());
  }
  if (choice.api && lang == "python") {
    for (auto [path, label] : {std::pair{ApiPath::kPooledRun, "API run, pooled"}, std::pair{ApiPath::kRun, "API run"},
                               std::pair{ApiPath::kExec, "API exec"}}) {
      workloads.push_back({fmt::format("python print(42), {}", label), *hello, false, "", "ms", path});
    }
  }
  return workloads;
}

int64_t Percentile(std::vector<int64_t> samples, int p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  // Nearest rank: the smallest sample with at least p% of the samples at or below it.
  auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(samples.size())));
  return samples[std::clamp<size_t>(rank, 1, samples.size()) - 1];
}

void Summarize(BenchReport& report) {
  for (auto& row : report.rows) {
    row.p50 = Percentile(row.samples, 50);
    row.p90 = Percentile(row.samples, 90);
    row.p99 = Percentile(row.samples, 99);
    row.max = row.samples.empty() ? 0 : *std::max_element(row.samples.begin(), row.samples.end());
  }
  for (auto& row : report.rows) {
    auto base = std::find_if(report.rows.begin(), report.rows.end(), [&](const BenchRow& r) {
      return r.sandbox == report.baseline && r.workload == row.workload;
    });
    bool known = base != report.rows.end() && !base->samples.empty() && !row.samples.empty();
    row.ratio = known && base->p50 > 0 ? static_cast<double>(row.p50) / static_cast<double>(base->p50) : 0;
    row.delta = known ? std::optional<int64_t>(row.p50 - base->p50) : std::nullopt;
  }
}

namespace {

// (workload, sandbox) -> its row in report.rows, or -1: a warm workload has rows only where
// there is a warm path, an API one where there is an API. any_warm and any_api say whether any
// row is of each.
std::vector<std::vector<int>> PlanRows(const BenchPlan& plan, const std::vector<Profile>& profiles,
                                       BenchReport& report, bool& any_warm, bool& any_api) {
  std::vector<std::vector<int>> row_of(plan.workloads.size(), std::vector<int>(plan.sandboxes.size(), -1));
  any_warm = false;
  any_api = false;
  for (size_t w = 0; w < plan.workloads.size(); ++w) {
    for (size_t s = 0; s < plan.sandboxes.size(); ++s) {
      const Workload& workload = plan.workloads[w];
      if (workload.warm && !HasWarmPath(profiles[s])) continue;
      if (!workload.warm && profiles[s].warm_only) continue;
      if (workload.api && !HasApiPath(profiles[s])) continue;
      if (CannotExpressEgress(profiles[s], workload.c)) continue;
      any_warm |= workload.warm;
      any_api |= workload.api.has_value();
      row_of[w][s] = static_cast<int>(report.rows.size());
      BenchRow row;
      row.sandbox = plan.sandboxes[s];
      row.workload = workload.name;
      row.unit = workload.unit;
      report.rows.push_back(std::move(row));
    }
  }
  return row_of;
}

// One persistent sandbox per sandbox with a warm path, for all its warm samples, or why not.
struct WarmSandboxes {
  std::vector<std::unique_ptr<WarmSandbox>> sandbox;
  std::vector<std::string> error;
};

WarmSandboxes PrepareWarm(const BenchPlan& plan, const std::vector<Profile>& profiles,
                          const std::string& payload_dir, bool any_warm) {
  WarmSandboxes warm{std::vector<std::unique_ptr<WarmSandbox>>(plan.sandboxes.size()),
                     std::vector<std::string>(plan.sandboxes.size())};
  for (size_t s = 0; any_warm && s < plan.sandboxes.size(); ++s) {
    if (!HasWarmPath(profiles[s])) continue;
    auto prepared = WarmSandbox::Prepare(profiles[s], payload_dir);
    if (prepared) warm.sandbox[s] = std::move(*prepared);
    else warm.error[s] = prepared.error().ToString();
  }
  return warm;
}

// The API servers of each sandbox with an API path, for all its API samples, or why not.
struct ApiBenches {
  std::vector<std::unique_ptr<ApiBench>> bench;
  std::vector<std::string> error;
};

ApiBenches PrepareApi(const BenchPlan& plan, const std::vector<Profile>& profiles, bool any_api) {
  ApiBenches api{std::vector<std::unique_ptr<ApiBench>>(plan.sandboxes.size()),
                 std::vector<std::string>(plan.sandboxes.size())};
  for (size_t s = 0; any_api && s < plan.sandboxes.size(); ++s) {
    if (!HasApiPath(profiles[s])) continue;
    auto started = ApiBench::Start(profiles[s]);
    if (started) api.bench[s] = std::move(*started);
    else api.error[s] = started.error().ToString();
  }
  return api;
}

// One sample, in the workload's unit: a warm exec into the row's persistent sandbox, a request
// to the row's API server, or a whole cold run of the case, timed or measured. failure is left
// empty when the sample passed.
int64_t TakeSample(const Workload& workload, const Profile& profile, size_t s,
                   const WarmSandboxes& warm, const ApiBenches& api, const std::string& payload_dir,
                   const RunOptions& options, std::string& failure) {
  if (workload.api) {
    auto sample = api.bench[s] ? api.bench[s]->Sample(*workload.api)
                               : std::unexpected(Error{"API server", api.error[s], 0});
    if (sample) return *sample;
    failure = sample.error().ToString();
    return 0;
  }
  if (workload.warm) {
    auto sample = warm.sandbox[s] ? warm.sandbox[s]->Sample(profile, workload.c)
                                  : std::unexpected(Error{"warm sandbox", warm.error[s], 0});
    if (sample) return *sample;
    failure = sample.error().ToString();
    return 0;
  }
  CaseReport r = RunCase(profile, workload.c, payload_dir, options);
  if (r.verdict != Verdict::kPass) {
    failure = fmt::format("{} {}", ToString(r.verdict), r.reason);
    return 0;
  }
  if (workload.measure.empty()) return r.wall_ms;
  auto measured = Measured(workload, r.stdout_data);
  if (!measured) failure = measured.error().ToString();
  return measured.value_or(0);
}

// The bursts' rows, after the runs: for each sandbox with an API server, one burst without a
// pool and one with, each a row whose samples are its requests' latencies.
void RunBursts(const BenchPlan& plan, const ApiBenches& api, BenchReport& report,
               const std::function<void(const std::string&)>& on_sample) {
  for (bool pooled : {false, true}) {
    for (size_t s = 0; s < plan.sandboxes.size(); ++s) {
      if (!api.bench[s] && api.error[s].empty()) continue;  // no API path
      if (Interrupted()) return;
      BenchRow row;
      row.sandbox = plan.sandboxes[s];
      row.workload = fmt::format("python echo, API burst of {}{}", plan.burst, pooled ? ", pooled" : "");
      if (!api.bench[s]) {
        row.failures.push_back("API server: " + api.error[s]);
      } else {
        BurstResult burst = api.bench[s]->Burst(plan.burst, pooled);
        row.samples = std::move(burst.ms);
        row.failures = std::move(burst.failures);
        if (burst.seconds > 0) row.per_second = static_cast<double>(row.samples.size()) / burst.seconds;
      }
      if (on_sample) {
        on_sample(fmt::format("[burst] {} {}: {} answered, {:.1f}/s, {} failed", row.sandbox, row.workload,
                              row.samples.size(), row.per_second.value_or(0), row.failures.size()));
      }
      report.rows.push_back(std::move(row));
    }
  }
}

}  // namespace

BenchReport RunBench(const BenchPlan& plan, const std::vector<Profile>& profiles,
                     const std::string& payload_dir, const std::string& work_root,
                     const std::function<void(const std::string&)>& on_sample) {
  BenchReport report;
  report.runs = plan.runs;
  report.baseline = plan.sandboxes.empty() ? "" : plan.sandboxes.front();
  bool any_warm = false, any_api = false;
  std::vector<std::vector<int>> row_of = PlanRows(plan, profiles, report, any_warm, any_api);
  WarmSandboxes warm = PrepareWarm(plan, profiles, payload_dir, any_warm);
  ApiBenches api = PrepareApi(plan, profiles, any_api);
  RunOptions options;
  options.jobs = 1;
  options.work_root = work_root;
  options.keep_stdout = true;
  // The egress rows' test internet, for all their runs.
  std::unique_ptr<TestInternet> internet;
  bool any_egress = false;
  for (size_t w = 0; w < plan.workloads.size(); ++w) {
    for (size_t s = 0; s < plan.sandboxes.size(); ++s) any_egress |= row_of[w][s] >= 0 && plan.workloads[w].c.egress;
  }
  if (any_egress) {
    auto made = TestInternet::Create();
    if (made) internet = std::move(*made);
    else options.internet_unavailable = made.error().ToString();
    options.internet = internet.get();
  }
  for (int run = 1; run <= plan.runs; ++run) {
    for (size_t w = 0; w < plan.workloads.size(); ++w) {
      for (size_t s = 0; s < plan.sandboxes.size(); ++s) {
        // Stopped early, the samples so far still make a report, and the warm sandboxes go.
        if (row_of[w][s] < 0 || Interrupted()) continue;
        BenchRow& into = report.rows[static_cast<size_t>(row_of[w][s])];
        std::string failure;
        int64_t sample = TakeSample(plan.workloads[w], profiles[s], s, warm, api, payload_dir, options, failure);
        if (failure.empty()) into.samples.push_back(sample);
        else into.failures.push_back(fmt::format("run {}: {}", run, failure));
        if (on_sample) {
          on_sample(fmt::format("[{}/{}] {} {}: {} {} {}", run, plan.runs, into.sandbox, into.workload, sample,
                                into.unit, failure.empty() ? "pass" : failure));
        }
      }
    }
  }
  if (any_api && plan.burst > 0) RunBursts(plan, api, report, on_sample);
  Summarize(report);
  return report;
}

json ToJson(const BenchReport& report) {
  json rows = json::array();
  for (const auto& r : report.rows) {
    rows.push_back({{"sandbox", r.sandbox}, {"workload", r.workload}, {"unit", r.unit}, {"samples", r.samples},
                    {"failures", r.failures}, {"p50", r.p50}, {"p90", r.p90}, {"p99", r.p99}, {"max", r.max},
                    {"ratio_to_baseline", r.ratio},
                    {"delta_to_baseline", r.delta ? json(*r.delta) : json(nullptr)}});
    if (r.per_second) rows.back()["per_second"] = *r.per_second;
  }
  return {{"host", report.host.is_null() ? json::object() : report.host},
          {"started", report.started},
          {"runs", report.runs},
          {"baseline", report.baseline},
          {"rows", rows}};
}

std::string ToMarkdown(const BenchReport& report) {
  std::string out = fmt::format("# smolvm-check bench, {}\n\n", report.started);
  out += fmt::format("{} runs per row, interleaved; wall time in ms of one whole sandbox invocation (cold) or of "
                     "one `smolbox exec` into a sandbox created beforehand (warm exec; the baseline runs the "
                     "interpreter directly); the API rows time one request to `smolbox serve` from the client, "
                     "a run from a warm pool, a run that starts its own sandbox, and an exec into a created one "
                     "(the baseline runs `python3 -c 'print(42)'` directly); the egress rows give what the workload measured of its own fetches "
                     "on the test internet (a GET's median in µs, a download's rate in kB/s); ratio and delta: "
                     "p50 over, and minus, {}'s p50 for the same workload.\n\n",
                     report.runs, report.baseline);
  out += "| workload | sandbox | unit | p50 | p90 | max | ratio | delta | failed runs |\n"
         "|---|---|---|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& r : report.rows) {
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", r.workload, r.sandbox, r.unit,
                       Cell(r, r.p50), Cell(r, r.p90), Cell(r, r.max), Ratio(r), Delta(r), r.failures.size());
  }
  bool any_burst = false;
  for (const auto& r : report.rows) {
    if (!r.per_second) continue;
    if (!any_burst) {
      out += "\nBursts: every run sent at once, each from its own client, to `smolbox serve` (16 at a time, "
             "the rest queued), each printing its own token; the baseline runs the interpreters 16 at a time, "
             "each timed from the burst's start.\n\n";
      any_burst = true;
    }
    out += fmt::format("- {} on {}: {} answered, {:.1f} per second; p50 {} ms, p99 {} ms, {} failed\n", r.workload,
                       r.sandbox, r.samples.size(), *r.per_second, Cell(r, r.p50), Cell(r, r.p99), r.failures.size());
  }
  for (const auto& r : report.rows) {
    for (const auto& f : r.failures) out += fmt::format("\n- {} on {}: {}", r.workload, r.sandbox, f);
  }
  return out + "\n";
}

std::string ToSvg(const BenchReport& report) {
  constexpr int kLabelWidth = 330, kPlotWidth = 520, kBar = 18, kGap = 8, kTop = 40, kRight = 90;
  // Times only: the egress rows' µs and kB/s are in bench.md and bench.json.
  std::vector<const BenchRow*> timed;
  for (const auto& r : report.rows) {
    if (r.unit == "ms") timed.push_back(&r);
  }
  int64_t highest = 1;
  for (const BenchRow* r : timed) highest = std::max(highest, std::max(r->p90, r->p50));
  // Log scale from 1 ms: a 20 ms interpreter and a 3 s emulated VM share one chart.
  double span = std::log10(static_cast<double>(highest)) + 0.1;
  auto x = [&](int64_t ms) {
    return kLabelWidth + static_cast<int>(kPlotWidth * std::log10(static_cast<double>(std::max<int64_t>(ms, 1))) / span);
  };
  int height = kTop + static_cast<int>(timed.size()) * (kBar + kGap) + 30;
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n",
      kLabelWidth + kPlotWidth + kRight, height);
  out += fmt::format("<text x=\"10\" y=\"20\" font-size=\"14\">smolvm-check bench: p50 (bar) and p90 (whisker), ms, log scale; {} runs</text>\n",
                     report.runs);
  int y = kTop;
  for (const BenchRow* row : timed) {
    const BenchRow& r = *row;
    out += fmt::format("<text x=\"10\" y=\"{}\">{} | {}</text>\n", y + kBar - 5, XmlEscape(r.workload), XmlEscape(r.sandbox));
    if (!r.samples.empty()) {
      out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>\n", kLabelWidth, y,
                         std::max(1, x(r.p50) - kLabelWidth), kBar, r.sandbox == report.baseline ? "#888" : "#4a7ab5");
      out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#222\"/>\n", x(r.p50), y + kBar / 2, x(r.p90), y + kBar / 2);
      out += fmt::format("<text x=\"{}\" y=\"{}\">{} ms {}</text>\n", x(r.p90) + 6, y + kBar - 5, r.p50, Ratio(r));
    } else {
      out += fmt::format("<text x=\"{}\" y=\"{}\">no passing run</text>\n", kLabelWidth, y + kBar - 5);
    }
    y += kBar + kGap;
  }
  return out + "</svg>\n";
}

Expected<void> WriteBenchReports(const BenchReport& report, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return std::unexpected(Error{dir, ec.message(), 0});
  for (auto [name, text] : {std::pair<const char*, std::string>{"bench.json", ToJson(report).dump(2) + "\n"},
                            {"bench.md", ToMarkdown(report)},
                            {"bench.svg", ToSvg(report)}}) {
    std::ofstream out(dir + "/" + name);
    out << text;
    if (!out.flush()) return std::unexpected(Error{dir + "/" + name, "cannot write", errno});
  }
  return {};
}

}  // namespace smolvm_check
