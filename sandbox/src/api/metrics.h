// What `GET /metrics` reports, in Prometheus's text format: requests by endpoint and code,
// results by status, limits hit, in-flight execs, sandboxes by state, warm pools' sizes and
// runs, the queue of runs and execs waiting for a slot, and each endpoint's p50 and p99 latency
// over its last 1024 requests.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "exec_queue.h"
#include "smolbox/result.h"
#include "warm_pool.h"

namespace smolbox::api {

class Metrics {
 public:
  void CountRequest(const std::string& endpoint, int code, double ms);
  // A run's or an exec's result ("run" or "exec").
  void CountResult(const std::string& kind, const RunResult& result);
  void CountPoolHit();
  // sandboxes: how many the server holds in each state ("running", "busy", "dead", ...).
  std::string Render(const std::map<std::string, int>& sandboxes, const ExecQueue::Stats& execs,
                     const std::vector<PoolSize>& pools) const;

 private:
  static constexpr size_t kLatencyWindow = 1024;
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
  std::map<std::pair<std::string, std::string>, int64_t> results_;
  std::map<std::string, int64_t> limits_hit_;
  std::map<std::string, std::deque<double>> latencies_ms_;
  int64_t pooled_runs_ = 0;
};

}  // namespace smolbox::api
