#include "metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace smolbox::api {
namespace {

// The limit a status stands for, if it is one.
const char* LimitOfStatus(Status status) {
  switch (status) {
    case Status::kTimeout:
      return "timeout";
    case Status::kCpuLimit:
      return "cpu";
    case Status::kMemoryLimit:
      return "memory";
    case Status::kOutputLimit:
      return "output";
    default:
      return nullptr;
  }
}

double Quantile(std::vector<double> samples, double q) {
  std::sort(samples.begin(), samples.end());
  size_t at = static_cast<size_t>(q * static_cast<double>(samples.size() - 1) + 0.5);
  return samples[std::min(at, samples.size() - 1)];
}

// A label's value in the text format: backslash, quote and newline escaped.
std::string LabelValue(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '"') out += '\\';
    out += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return out;
}

}  // namespace

void Metrics::CountRequest(const std::string& endpoint, int code, double ms) {
  std::lock_guard lock(mutex_);
  ++requests_[{endpoint, code}];
  auto& window = latencies_ms_[endpoint];
  window.push_back(ms);
  if (window.size() > kLatencyWindow) window.pop_front();
}

void Metrics::CountResult(const std::string& kind, const RunResult& result) {
  std::lock_guard lock(mutex_);
  ++results_[{kind, ToString(result.status)}];
  if (const char* limit = LimitOfStatus(result.status)) ++limits_hit_[limit];
  for (const std::string& limit : result.limits_hit) ++limits_hit_[limit];
}

void Metrics::CountPoolHit() {
  std::lock_guard lock(mutex_);
  ++pooled_runs_;
}

std::string Metrics::Render(const std::map<std::string, int>& sandboxes, const ExecQueue::Stats& execs,
                            const std::vector<PoolSize>& pools) const {
  std::lock_guard lock(mutex_);
  std::string text;
  auto out = [&text](std::string_view line) { text.append(line).append("\n"); };
  out("# HELP smolbox_api_requests_total API requests served, by endpoint and HTTP status.");
  out("# TYPE smolbox_api_requests_total counter");
  for (const auto& [key, n] : requests_) {
    out(fmt::format("smolbox_api_requests_total{{endpoint=\"{}\",code=\"{}\"}} {}", key.first, key.second, n));
  }
  out("# HELP smolbox_results_total Runs and execs ended, by status.");
  out("# TYPE smolbox_results_total counter");
  for (const auto& [key, n] : results_) {
    out(fmt::format("smolbox_results_total{{kind=\"{}\",status=\"{}\"}} {}", key.first, key.second, n));
  }
  out("# HELP smolbox_limit_hits_total Limits that ended or cut a workload.");
  out("# TYPE smolbox_limit_hits_total counter");
  for (const auto& [limit, n] : limits_hit_) out(fmt::format("smolbox_limit_hits_total{{limit=\"{}\"}} {}", limit, n));
  out("# HELP smolbox_sandboxes Sandboxes this server holds, by state.");
  out("# TYPE smolbox_sandboxes gauge");
  for (const auto& [state, n] : sandboxes) out(fmt::format("smolbox_sandboxes{{state=\"{}\"}} {}", state, n));
  out("# HELP smolbox_execs_running Runs and execs in progress.");
  out("# TYPE smolbox_execs_running gauge");
  out(fmt::format("smolbox_execs_running {}", execs.running));
  out("# HELP smolbox_execs_queued Runs and execs waiting for a slot (--max-queued).");
  out("# TYPE smolbox_execs_queued gauge");
  out(fmt::format("smolbox_execs_queued {}", execs.queued));
  out("# HELP smolbox_queue_wait_seconds How long runs and execs waited in the queue for a slot.");
  out("# TYPE smolbox_queue_wait_seconds summary");
  out(fmt::format("smolbox_queue_wait_seconds_sum {:.6f}", execs.wait_seconds_sum));
  out(fmt::format("smolbox_queue_wait_seconds_count {}", execs.waits));
  out("# HELP smolbox_queue_refused_total Runs and execs refused with 429: the queue was full, or their timeout passed in it.");
  out("# TYPE smolbox_queue_refused_total counter");
  out(fmt::format("smolbox_queue_refused_total{{reason=\"full\"}} {}", execs.refused_full));
  out(fmt::format("smolbox_queue_refused_total{{reason=\"timeout\"}} {}", execs.timed_out));
  out("# HELP smolbox_pool_ready Sandboxes ready in each warm pool (--pool).");
  out("# TYPE smolbox_pool_ready gauge");
  for (const PoolSize& pool : pools) out(fmt::format("smolbox_pool_ready{{pool=\"{}\"}} {}", LabelValue(pool.name), pool.ready));
  out("# HELP smolbox_pool_size Each warm pool's size, as --pool asks.");
  out("# TYPE smolbox_pool_size gauge");
  for (const PoolSize& pool : pools) out(fmt::format("smolbox_pool_size{{pool=\"{}\"}} {}", LabelValue(pool.name), pool.size));
  out("# HELP smolbox_pooled_runs_total One-shot runs served by a warm pool's sandbox.");
  out("# TYPE smolbox_pooled_runs_total counter");
  out(fmt::format("smolbox_pooled_runs_total {}", pooled_runs_));
  out("# HELP smolbox_request_duration_ms Request latency over the last 1024 requests of each endpoint.");
  out("# TYPE smolbox_request_duration_ms summary");
  for (const auto& [endpoint, window] : latencies_ms_) {
    if (window.empty()) continue;
    std::vector<double> samples(window.begin(), window.end());
    for (double q : {0.5, 0.99}) {
      out(fmt::format("smolbox_request_duration_ms{{endpoint=\"{}\",quantile=\"{}\"}} {:.3f}", endpoint, q,
                      Quantile(samples, q)));
    }
  }
  return text;
}

}  // namespace smolbox::api
