// The API under load: 50 concurrent clients of 20 requests each, a mix of creates, runs, execs
// and removes with a timeout and memory bombs among them. Every result must be right (each
// client's token comes back to it alone), nothing may be lost, and the server and the host
// must hold no more fds, mounts, cgroups, run dirs or sandboxes at the end than at the start.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "api_server.h"

namespace smolbox::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kClients = 50;
constexpr int kRequestsEach = 20;  // a create, 18 runs and execs, a remove
constexpr const char* kPython = "/usr/bin/python3";
constexpr const char* kRuns = "/run/smolbox/runs";

struct HostCounts {
  size_t mounts, cgroups, runs;
  bool operator==(const HostCounts&) const = default;
};

HostCounts Count() { return {CountLines("/proc/self/mountinfo"), CountSmolboxCgroups(), CountEntries(kRuns)}; }

std::string Describe(const HostCounts& c) {
  return fmt::format("{} mounts, {} smolbox cgroups, {} run dirs", c.mounts, c.cgroups, c.runs);
}

// Latencies by kind of request, and what went wrong, shared by the clients.
struct Outcomes {
  std::mutex mutex;
  std::map<std::string, std::vector<double>> ms;
  std::vector<std::string> errors;

  void Record(const std::string& kind, Clock::time_point start) {
    std::chrono::duration<double, std::milli> took = Clock::now() - start;
    std::lock_guard lock(mutex);
    ms[kind].push_back(took.count());
  }
  void Error(std::string what) {
    std::lock_guard lock(mutex);
    errors.push_back(std::move(what));
  }
};

double Quantile(std::vector<double> samples, double q) {
  std::sort(samples.begin(), samples.end());
  return samples[std::min(samples.size() - 1, static_cast<size_t>(q * static_cast<double>(samples.size())))];
}

// One client: its own sandbox and token; every reply checked.
void Client(const ApiServer& server, int n, Outcomes& out) {
  auto client = server.Client();
  std::string token = fmt::format("client-{}-{}", n, RandomToken());
  auto fail = [&](int request, const std::string& what) { out.Error(fmt::format("client {} request {}: {}", n, request, what)); };

  auto start = Clock::now();
  auto [created_code, created] = Post(*client, "/v1/sandboxes", R"({"backend": "ns"})");
  out.Record("create", start);
  std::string id = created.is_object() ? created.value("id", "") : "";
  if (created_code != 201 || id.empty()) return fail(0, fmt::format("create: {} {}", created_code, created.dump()));

  json echo = {{"backend", "ns"}, {"argv", {kPython, "-c", "import sys; print(sys.argv[1])", token}}};
  for (int j = 1; j < kRequestsEach - 1; ++j) {
    start = Clock::now();
    if (j == 7) {
      // A timeout: the wall-time limit ends a sleeper.
      json spec = {{"backend", "ns"}, {"argv", {kPython, "-c", "import time; time.sleep(60)"}}, {"limits", {{"timeout_ms", 1000}}}};
      auto [code, result] = Post(*client, "/v1/run", spec.dump());
      out.Record("run timeout", start);
      if (code != 200 || result.value("status", "") != "timeout") fail(j, "timeout run: " + result.dump().substr(0, 300));
    } else if (j % 6 == 4) {
      // A memory bomb: 128 MiB touched under a 64 MiB limit.
      json spec = {{"backend", "ns"},
                   {"argv", {kPython, "-c", "held = [bytearray(1 << 20) for _ in range(128)]\nprint('ALLOCATED')"}},
                   {"limits", {{"memory_mib", 64}}}};
      auto [code, result] = Post(*client, "/v1/run", spec.dump());
      out.Record("run memory bomb", start);
      if (code != 200 || result.value("status", "") != "memory_limit") fail(j, "memory bomb: " + result.dump().substr(0, 300));
    } else if (j % 2 == 1) {
      auto reply = client->Post(("/v1/sandboxes/" + id + "/exec").c_str(), json{{"argv", echo["argv"]}}.dump(), "application/json");
      out.Record("exec", start);
      std::string printed;
      json last;
      for (const json& line : reply ? NdjsonLines(reply->body) : std::vector<json>{}) {
        if (line.value("type", "") == "stdout") printed += line.value("data", "");
        last = line;
      }
      if (!reply || reply->status != 200 || printed != token + "\n" || last["result"].value("status", "") != "exited") {
        fail(j, fmt::format("exec: {} printed {:?}", reply ? reply->status : -1, printed));
      }
    } else {
      auto [code, result] = Post(*client, "/v1/run", echo.dump());
      out.Record("run", start);
      if (code != 200 || result.value("stdout", "") != token + "\n") fail(j, "run: " + result.dump().substr(0, 300));
    }
  }
  start = Clock::now();
  auto removed = client->Delete(("/v1/sandboxes/" + id).c_str());
  out.Record("remove", start);
  if (!removed || removed->status != 200) fail(kRequestsEach - 1, "remove: " + (removed ? removed->body : "no reply"));
}

TEST(ApiLoad, fifty_clients_of_twenty_requests_get_every_result_right_and_leave_nothing) {
  HostCounts before = Count();
  size_t sandboxes_before = ApiSandboxesOnHost().size();
  ASSERT_EQ(sandboxes_before, 0u) << "API sandboxes left by something else";
  ApiServer server({"--max-concurrent-execs", "64", "--max-sandboxes", "64"});
  ASSERT_FALSE(server.address().empty());
  std::string fd_dir = fmt::format("/proc/{}/fd", server.process().pid());
  // The server's fds once it has served a request and its threads are up.
  ASSERT_EQ(Post(*server.Client(), "/v1/run", R"({"backend": "ns", "argv": ["/bin/true"]})").first, 200);
  size_t server_fds = CountEntries(fd_dir);

  Outcomes out;
  auto started = Clock::now();
  std::vector<std::thread> clients;
  for (int n = 0; n < kClients; ++n) clients.emplace_back([&, n] { Client(server, n, out); });
  for (auto& t : clients) t.join();
  std::chrono::duration<double> took = Clock::now() - started;

  size_t requests = 0;
  for (const auto& [kind, samples] : out.ms) requests += samples.size();
  EXPECT_EQ(requests, static_cast<size_t>(kClients * kRequestsEach)) << "requests lost";
  for (size_t i = 0; i < std::min<size_t>(out.errors.size(), 10); ++i) ADD_FAILURE() << out.errors[i];
  EXPECT_EQ(out.errors.size(), 0u);

  std::string summary = fmt::format("{} requests from {} clients in {:.1f} s:", requests, kClients, took.count());
  for (const auto& [kind, samples] : out.ms) {
    summary += fmt::format("\n  {:<16} n={:<4} p50 {:>7.1f} ms  p99 {:>7.1f} ms", kind, samples.size(),
                           Quantile(samples, 0.5), Quantile(samples, 0.99));
  }
  fmt::print("{}\n", summary);
  RecordProperty("latencies", summary);

  EXPECT_TRUE(WaitUntil([&] { return CountEntries(fd_dir) <= server_fds; }, std::chrono::seconds(10)))
      << "the server holds " << CountEntries(fd_dir) << " fds, " << server_fds << " before the load";
  EXPECT_TRUE(ApiSandboxesOnHost().empty());
  EXPECT_EQ(server.Stop(SIGTERM), 0);
  EXPECT_TRUE(WaitUntil([&] { return Count() == before; }, std::chrono::seconds(30)))
      << "before: " << Describe(before) << "; after: " << Describe(Count());
}

// A burst: kBurst one-shot runs at once against --max-concurrent-execs 16. Each waits its turn
// in the queue, and each gets its own output back, with no 429 and no 5xx. The latencies and the
// throughput are printed; speed is the bench's to judge, not this test's.
constexpr int kBurst = 300;

void Burst(const std::vector<std::string>& flags, const char* what) {
  ApiServer server(flags);
  ASSERT_FALSE(server.address().empty()) << server.process().err();
  // Warm pools fill before the burst, so that it measures them serving.
  if (flags.size() > 2) {
    ASSERT_TRUE(WaitUntil([&] {
      auto metrics = server.Client()->Get("/metrics");
      return metrics && metrics->body.find("smolbox_pool_ready{pool=\"ns\"} 4") != std::string::npos;
    }, std::chrono::seconds(60)));
  }
  Outcomes out;
  auto started = Clock::now();
  std::vector<std::thread> clients;
  for (int n = 0; n < kBurst; ++n) {
    clients.emplace_back([&, n] {
      auto client = server.Client();
      std::string token = fmt::format("burst-{}-{}", n, RandomToken());
      // A timeout long enough to wait behind the whole burst on two cores.
      json spec = {{"backend", "ns"}, {"argv", {kPython, "-c", "import sys; print(sys.argv[1])", token}},
                   {"limits", {{"timeout_ms", 170000}}}};
      auto start = Clock::now();
      auto [code, result] = Post(*client, "/v1/run", spec.dump());
      out.Record("run", start);
      if (code != 200 || result.value("stdout", "") != token + "\n") {
        out.Error(fmt::format("run {}: {} {}", n, code, result.dump().substr(0, 300)));
      }
    });
  }
  for (auto& t : clients) t.join();
  std::chrono::duration<double> took = Clock::now() - started;
  for (size_t i = 0; i < std::min<size_t>(out.errors.size(), 10); ++i) ADD_FAILURE() << out.errors[i];
  EXPECT_EQ(out.errors.size(), 0u);
  const auto& ms = out.ms["run"];
  ASSERT_EQ(ms.size(), static_cast<size_t>(kBurst));
  std::string summary = fmt::format("{}: {} runs at once in {:.1f} s, {:.1f} runs/s; p50 {:.0f} ms, p99 {:.0f} ms", what,
                                    kBurst, took.count(), kBurst / took.count(), Quantile(ms, 0.5), Quantile(ms, 0.99));
  fmt::print("{}\n", summary);
  ::testing::Test::RecordProperty("burst", summary);
  auto metrics = server.Client()->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("smolbox_queue_refused_total{reason=\"full\"} 0"), std::string::npos) << metrics->body;
  EXPECT_EQ(server.Stop(SIGTERM), 0);
  // A pool refilled during the burst warms each new sandbox with two execs in a row, which the
  // runs' forks on other threads must not make look busy.
  EXPECT_EQ(server.process().err().find("failed its warm-up"), std::string::npos) << server.process().err();
}

TEST(ApiLoad, a_burst_of_three_hundred_runs_waits_in_the_queue_and_every_one_gets_its_own_output) {
  Burst({"--max-concurrent-execs", "16"}, "cold");
}

TEST(ApiLoad, a_burst_of_three_hundred_runs_against_a_warm_pool_gets_every_output_too) {
  Burst({"--max-concurrent-execs", "16", "--pool", "ns=4"}, "warm pool");
}

}  // namespace
}  // namespace smolbox::testing
