// Warm pools (smolbox serve --pool): a matching one-shot run takes a ready sandbox, which
// serves that one request and is never given to another; the limits hold in it as in a run of
// its own; what does not match starts its own sandbox; the pool refills, and ends with the
// server.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <regex>
#include <string>

#include "api_server.h"

namespace smolbox::testing {
namespace {

using nlohmann::json;

constexpr const char* kPython = "/usr/bin/python3";

json PythonRun(const std::string& code, const json& extra = json::object()) {
  json spec = {{"backend", "ns"}, {"argv", {kPython, "-c", code}}};
  spec.update(extra);
  return spec;
}

struct PooledReply {
  int code = -1;
  bool pooled = false;
  json result;
};

PooledReply RunOnce(httplib::Client& client, const json& spec) {
  auto reply = client.Post("/v1/run", spec.dump(), "application/json");
  if (!reply) return {};
  return {reply->status, reply->get_header_value("Smolbox-Pooled") == "true",
          json::parse(reply->body, nullptr, false)};
}

// The value of `smolbox_pool_ready{pool="NAME"}` in /metrics, or -1.
int PoolReady(httplib::Client& client, const std::string& name) {
  auto reply = client.Get("/metrics");
  if (!reply) return -1;
  std::smatch match;
  std::regex line("smolbox_pool_ready\\{pool=\"" + name + "\"\\} (\\d+)");
  return std::regex_search(reply->body, match, line) ? std::stoi(match[1]) : -1;
}

bool WaitForPool(httplib::Client& client, int ready) {
  return WaitUntil([&] { return PoolReady(client, "ns") == ready; }, std::chrono::seconds(60));
}

TEST(ApiPool, a_matching_run_takes_a_ready_sandbox_and_no_tenant_sees_another_ones) {
  ApiServer server({"--pool", "ns=2"});
  auto client = server.Client();
  ASSERT_TRUE(WaitForPool(*client, 2)) << "the pool never filled";

  // The first tenant leaves a secret and a process behind in its sandbox's storage.
  std::string secret = RandomToken();
  auto first = RunOnce(*client, PythonRun("import os; open('/work/secret', 'w').write(os.environ['S']); "
                                          "open('/tmp/secret', 'w').write(os.environ['S']); print('wrote')",
                                          {{"env", {{"S", secret}}}}));
  EXPECT_EQ(first.code, 200);
  EXPECT_TRUE(first.pooled) << "a matching run did not take a pooled sandbox";
  EXPECT_EQ(first.result.value("stdout", ""), "wrote\n") << first.result.dump();

  // Every later tenant, pooled or not, finds none of it.
  for (int i = 0; i < 4; ++i) {
    auto next = RunOnce(*client, PythonRun("import os; print(os.path.exists('/work/secret'), os.path.exists('/tmp/secret'))"));
    EXPECT_EQ(next.code, 200);
    EXPECT_EQ(next.result.value("stdout", ""), "False False\n") << "run " << i << " saw an earlier tenant's files";
    EXPECT_EQ(next.result.value("stdout", "").find(secret), std::string::npos);
  }
  // Stdin, the working directory and the timeout go to the pooled run as to a run of its own.
  auto piped = RunOnce(*client, PythonRun("import os, sys; print(os.getcwd(), sys.stdin.read())",
                                          {{"stdin", "from stdin"}}));
  EXPECT_EQ(piped.result.value("stdout", ""), "/work from stdin\n") << piped.result.dump();

  // The pool refills after the runs it served.
  EXPECT_TRUE(WaitForPool(*client, 2)) << "the pool did not refill";
  auto metrics = client->Get("/metrics");
  ASSERT_TRUE(metrics);
  std::smatch match;
  ASSERT_TRUE(std::regex_search(metrics->body, match, std::regex("smolbox_pooled_runs_total (\\d+)")));
  EXPECT_GE(std::stoi(match[1]), 1);
  EXPECT_NE(metrics->body.find("smolbox_pool_size{pool=\"ns\"} 2"), std::string::npos);
  // Pooled sandboxes are the server's: not listed, not a client's to exec into.
  auto list = client->Get("/v1/sandboxes");
  ASSERT_TRUE(list);
  EXPECT_EQ(json::parse(list->body)["sandboxes"].size(), 0u) << list->body;
}

TEST(ApiPool, every_limit_holds_in_a_pooled_sandbox) {
  ApiServer server({"--pool", "ns=1"});
  auto client = server.Client();
  ASSERT_TRUE(WaitForPool(*client, 1));
  auto started = std::chrono::steady_clock::now();
  auto timeout = RunOnce(*client, PythonRun("while True: pass", {{"limits", {{"timeout_ms", 1000}}}}));
  EXPECT_TRUE(timeout.pooled);
  EXPECT_EQ(timeout.result.value("status", ""), "timeout") << timeout.result.dump();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30));

  ASSERT_TRUE(WaitForPool(*client, 1));
  // The pool's sandbox has the default memory limit (512 MiB): touching more is a memory limit.
  auto memory = RunOnce(*client, PythonRun("held = [bytearray(1 << 20) for _ in range(768)]\nprint('ALLOCATED')"));
  EXPECT_TRUE(memory.pooled);
  EXPECT_EQ(memory.result.value("status", ""), "memory_limit") << memory.result.dump();

  ASSERT_TRUE(WaitForPool(*client, 1));
  // And the default output cap, 1 MiB a stream.
  auto output = RunOnce(*client, PythonRun("import sys\nfor _ in range(4): sys.stdout.write('x' * (1 << 20))"));
  EXPECT_TRUE(output.pooled);
  EXPECT_EQ(output.result.value("status", ""), "output_limit");
  EXPECT_EQ(output.result.value("stdout", "").size(), size_t{1} << 20);
}

TEST(ApiPool, a_client_that_goes_away_cancels_its_pooled_run) {
  ApiServer server({"--pool", "ns=1"});
  auto client = server.Client();
  ASSERT_TRUE(WaitForPool(*client, 1)) << "the pool never filled";
  std::string token = RandomToken();
  json spec = PythonRun("import sys, time\nwhile True: time.sleep(0.1)", {{"limits", {{"timeout_ms", 600000}}}});
  spec["argv"].push_back(token);
  auto left = PostThenHangUpWhen(server, "/v1/run", spec.dump(), [&] { return CountProcessesWith(token) > 0; });
  EXPECT_TRUE(left.running) << "the workload never ran";
  EXPECT_FALSE(left.answered) << "the run answered before its client gave up";
  EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(token) == 0; }, std::chrono::seconds(30)))
      << "the workload outlived its client";
  // It was the pooled sandbox's run (counted once the cancelled exec has returned, a moment
  // after its workload is gone), which went with it, and the pool made another.
  auto other = server.Client();
  std::string metrics;
  bool counted = WaitUntil(
      [&] {
        auto reply = other->Get("/metrics");
        metrics = reply ? reply->body : "";
        return metrics.find("smolbox_pooled_runs_total 1\n") != std::string::npos;
      },
      std::chrono::seconds(30));
  EXPECT_TRUE(counted) << metrics;
  EXPECT_TRUE(WaitForPool(*other, 1)) << "the pool did not refill";
}

TEST(ApiPool, a_run_that_differs_from_the_pool_in_anything_but_its_command_starts_its_own_sandbox) {
  ApiServer server({"--pool", "ns=1"});
  auto client = server.Client();
  ASSERT_TRUE(WaitForPool(*client, 1));
  // Each is a sandbox the pool's is not: it must be made to measure, and its limit must hold.
  auto memory = RunOnce(*client, PythonRun("held = [bytearray(1 << 20) for _ in range(128)]\nprint('ALLOCATED')",
                                           {{"limits", {{"memory_mib", 64}}}}));
  EXPECT_FALSE(memory.pooled);
  EXPECT_EQ(memory.result.value("status", ""), "memory_limit") << memory.result.dump();
  auto cpu = RunOnce(*client, PythonRun("while True: pass", {{"limits", {{"cpu_ms", 500}}}}));
  EXPECT_FALSE(cpu.pooled);
  EXPECT_EQ(cpu.result.value("status", ""), "cpu_limit") << cpu.result.dump();
  auto user = RunOnce(*client, PythonRun("import os; print(os.getuid())", {{"user", "root"}}));
  EXPECT_FALSE(user.pooled);
  EXPECT_EQ(user.result.value("stdout", ""), "0\n") << user.result.dump();
  auto auto_backend = RunOnce(*client, json{{"argv", {kPython, "-c", "print(1)"}}});
  EXPECT_FALSE(auto_backend.pooled) << "a run that leaves the backend to the host matched the ns pool";
  EXPECT_EQ(PoolReady(*client, "ns"), 1) << "a run that did not match took the pool's sandbox";
}

TEST(ApiPool, the_pools_sandboxes_end_with_the_server_killed_or_stopped) {
  {
    ApiServer server({"--pool", "ns=2"});
    auto client = server.Client();
    ASSERT_TRUE(WaitForPool(*client, 2));
    EXPECT_EQ(ApiSandboxesOnHost().size(), 2u);
    EXPECT_EQ(server.Stop(SIGTERM), 0);
  }
  EXPECT_TRUE(ApiSandboxesOnHost().empty()) << "a stopped server left its pool";
  {
    ApiServer server({"--pool", "ns=2"});
    auto client = server.Client();
    ASSERT_TRUE(WaitForPool(*client, 2));
    EXPECT_EQ(server.Stop(SIGKILL), 128 + SIGKILL);
  }
  ApiServer next;
  EXPECT_TRUE(WaitUntil([] { return ApiSandboxesOnHost().empty(); }, std::chrono::seconds(30)))
      << "a killed server's pool outlived the next start";
}

TEST(ApiPool, a_bad_pool_is_refused_naming_the_flag_and_nothing_starts) {
  for (const char* pool : {"ns", "ns=0", "ns=65", "ns=two", "docker=1", "ns:no-such-image-here=1", "ns:/srv/rootfs=1"}) {
    Invocation serve = RunSmolbox({"serve", "--listen", "unix:/nonexistent/api.sock", "--pool", pool});
    EXPECT_EQ(serve.exit_code, 125) << pool;
    EXPECT_NE(serve.err.find("--pool"), std::string::npos) << pool << ": " << serve.err;
  }
  EXPECT_TRUE(ApiSandboxesOnHost().empty());
}

}  // namespace
}  // namespace smolbox::testing
