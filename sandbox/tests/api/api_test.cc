// The HTTP API against a real `smolbox serve` on the ns backend: runs, persistent sandboxes and
// streamed execs; every limit as through the CLI; bad requests, clients that go away, and the
// server's own death and shutdown; TCP with a token, and TLS.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <tuple>

#include "api_server.h"
#include "ns/fork_bomb.h"

namespace smolbox::testing {
namespace {

using nlohmann::json;

constexpr const char* kPython = "/usr/bin/python3";

json RunSpec(const std::string& code, const json& limits = json::object()) {
  json spec = {{"backend", "ns"}, {"argv", {kPython, "-c", code}}};
  if (!limits.empty()) spec["limits"] = limits;
  return spec;
}

// POSTs body and hands the reply's body to receive as it arrives; receive returning false
// hangs up.
httplib::Result PostStreaming(httplib::Client& client, const std::string& path, const std::string& body,
                              const std::function<bool(const char*, size_t)>& receive) {
  httplib::Request request;
  request.method = "POST";
  request.path = path;
  request.body = body;
  request.set_header("Content-Type", "application/json");
  request.content_receiver = [&receive](const char* data, size_t size, uint64_t, uint64_t) {
    return receive(data, size);
  };
  return client.send(request);
}

bool OnHost(const std::string& id) {
  auto names = ApiSandboxesOnHost();
  return std::find(names.begin(), names.end(), id) != names.end();
}

std::string Create(httplib::Client& client, const json& spec = {{"backend", "ns"}}) {
  auto [code, reply] = Post(client, "/v1/sandboxes", spec.dump());
  EXPECT_EQ(code, 201) << reply.dump();
  return reply.value("id", "");
}

// An exec's whole NDJSON reply.
std::vector<json> Exec(httplib::Client& client, const std::string& id, const json& request) {
  auto reply = client.Post(("/v1/sandboxes/" + id + "/exec").c_str(), request.dump(), "application/json");
  if (!reply) return {};
  EXPECT_EQ(reply->status, 200) << reply->body;
  return NdjsonLines(reply->body);
}

std::string Stream(const std::vector<json>& lines, const std::string& type) {
  std::string text;
  for (const json& line : lines) {
    if (line.value("type", "") == type) text += line.value("data", "");
  }
  return text;
}

TEST(Api, health_answers_and_an_unknown_endpoint_gets_a_json_404) {
  ApiServer server;
  ASSERT_FALSE(server.socket_path().empty()) << server.process().err();
  struct stat st{};
  ASSERT_EQ(stat(server.socket_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "only its user may connect";
  auto client = server.Client();
  auto health = client->Get("/v1/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(json::parse(health->body)["status"], "ok");
  auto missing = client->Get("/v1/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(json::parse(missing->body)["error"]["field"], "path");
}

TEST(Api, a_run_returns_what_the_cli_returns_for_the_same_spec) {
  ApiServer server;
  auto client = server.Client();
  std::string token = RandomToken();
  json spec = RunSpec("import sys; print(sys.argv[1]); sys.exit(3)");
  spec["argv"].push_back(token);
  auto [code, api] = Post(*client, "/v1/run", spec.dump());
  ASSERT_EQ(code, 200) << api.dump();
  Invocation cli = RunJson({}, {kPython, "-c", "import sys; print(sys.argv[1]); sys.exit(3)", token});
  ASSERT_TRUE(cli.result.is_object()) << cli.err;
  EXPECT_EQ(api["status"], "exited");
  EXPECT_EQ(api["exit_code"], 3);
  EXPECT_EQ(api["stdout"], token + "\n");
  // run's JSON shape: the same fields, with the same types.
  for (const auto& [key, value] : cli.result.items()) {
    ASSERT_TRUE(api.contains(key)) << key;
    EXPECT_EQ(api[key].type(), value.type()) << key;
  }
  EXPECT_EQ(api.size(), cli.result.size());
}

TEST(Api, every_limit_of_a_run_holds_as_through_the_cli) {
  ApiServer server;
  auto client = server.Client();
  auto started = std::chrono::steady_clock::now();
  auto [code, timeout] = Post(*client, "/v1/run", RunSpec("while True: pass", {{"timeout_ms", 1000}}).dump());
  EXPECT_EQ(code, 200);
  EXPECT_EQ(timeout["status"], "timeout") << timeout.dump();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30)) << "the timeout did not hold";

  auto [code2, memory] = Post(*client, "/v1/run",
                              RunSpec("held = [bytearray(1 << 20) for _ in range(512)]\nprint('ALLOCATED')",
                                      {{"memory_mib", 64}})
                                  .dump());
  EXPECT_EQ(code2, 200);
  EXPECT_EQ(memory["status"], "memory_limit") << memory.dump();
  EXPECT_EQ(memory["stdout"], "");

  auto [code3, output] = Post(*client, "/v1/run",
                              RunSpec("import sys\nfor _ in range(20): sys.stdout.write('x' * (1 << 20))",
                                      {{"output_bytes", 65536}})
                                  .dump());
  EXPECT_EQ(code3, 200);
  EXPECT_EQ(output["status"], "output_limit") << output.dump().substr(0, 300);
  EXPECT_EQ(output["stdout"].get<std::string>().size(), 65536u);

  auto [code4, forks] = Post(*client, "/v1/run", RunSpec(kPythonForkBomb, {{"pids", 16}}).dump());
  EXPECT_EQ(code4, 200);
  std::string out = forks.value("stdout", "");
  size_t at = out.find("forked ");
  ASSERT_NE(at, std::string::npos) << forks.dump();
  EXPECT_LT(std::stoi(out.substr(at + 7)), 16) << out;

  auto [code5, cpu] = Post(*client, "/v1/run", RunSpec("while True: pass", {{"cpu_ms", 500}}).dump());
  EXPECT_EQ(code5, 200);
  EXPECT_EQ(cpu["status"], "cpu_limit") << cpu.dump();
}

TEST(Api, bad_requests_get_a_4xx_naming_the_field_and_start_nothing) {
  ApiServer server({"--max-body", "64K"});
  auto client = server.Client();
  struct Case {
    const char* path;
    std::string body;
    int code;
    const char* field;
  };
  std::string big(100 << 10, ' ');
  Case cases[] = {
      {"/v1/run", R"({"argv": ["/bin/true"], "bogus": 1})", 400, "bogus"},
      {"/v1/run", R"({"argv": ["/bin/true"], "": 1})", 400, "\"\""},
      {"/v1/run", R"({"argv": ["/bin/true"], "limits": {"memory_mib": "lots"}})", 400, "limits.memory_mib"},
      {"/v1/run", R"({"argv": ["/bin/true"], "limits": {"memory_mib": 1}})", 400, "limits.memory_mib"},
      {"/v1/run", R"({"argv": )", 400, "request body"},
      // Without --volume-root, no volume at all.
      {"/v1/run", R"({"argv": ["/bin/true"], "mounts": [{"source": "/etc", "target": "/x"}]})", 400, "mounts"},
      {"/v1/run", R"({"argv": ["/bin/true"], "mounts": [{"source": "etc", "target": "/x"}]})", 400, "mounts"},
      {"/v1/run", R"({"argv": ["/bin/true"], "volume_root": "/"})", 400, "volume_root"},
      {"/v1/run", R"({"argv": ["/bin/cat"], "stdin_file": "/etc/shadow"})", 400, "stdin_file"},
      {"/v1/run", R"({"argv": ["/bin/true"], "image": "/"})", 400, "image"},
      {"/v1/run", R"({"argv": ["/bin/true"], "egress": {"netns": "/proc/1/ns/net"}})", 400, "egress.netns"},
      {"/v1/run", R"({"argv": ["/bin/true"], "egress": {"dns_server": "127.0.0.1:6379"}})", 400, "egress.dns_server"},
      {"/v1/sandboxes", R"({"egress": {"dns_server": "127.0.0.1"}})", 400, "egress.dns_server"},
      {"/v1/run", R"({"argv": ["/bin/true"], "stdin": ")" + big + R"("})", 413, "body"},
      {"/v1/sandboxes", R"({"argv": ["/bin/true"]})", 400, "argv"},
      {"/v1/sandboxes", R"({"limits": {"pids": -1}})", 400, "limits.pids"},
      // A zygote serves a created sandbox's execs, on vm only, and only Python's.
      {"/v1/run", R"({"argv": ["/bin/true"], "prewarm": "python"})", 400, "prewarm"},
      {"/v1/sandboxes", R"({"backend": "ns", "prewarm": "python"})", 400, "prewarm"},
      {"/v1/sandboxes", R"({"backend": "vm", "prewarm": "node"})", 400, "prewarm"},
      {"/v1/sandboxes", R"({"backend": "vm", "prewarm": 1})", 400, "prewarm"},
      {"/v1/sandboxes/api-0000000000000000/exec", R"({"argv": ["/bin/true"]})", 404, "id"},
  };
  for (const Case& c : cases) {
    auto [code, reply] = Post(*client, c.path, c.body);
    EXPECT_EQ(code, c.code) << c.path << " " << c.body.substr(0, 120) << " -> " << reply.dump();
    ASSERT_TRUE(reply.is_object()) << c.body.substr(0, 120);
    EXPECT_EQ(reply["error"]["field"], c.field) << reply.dump();
    EXPECT_FALSE(reply["error"]["reason"].get<std::string>().empty());
  }
  // And an exec's own fields, in a sandbox that exists.
  std::string id = Create(*client);
  for (auto [body, field] : std::initializer_list<std::pair<const char*, const char*>>{
           {R"({"argv": "python3"})", "argv"},
           {R"({"argv": []})", "argv"},
           {R"({"argv": ["/bin/true"], "timeout_ms": "1s"})", "timeout_ms"},
           {R"({"argv": ["/bin/true"], "timeout_ms": -5})", "timeout_ms"},
           {R"({"argv": ["/bin/true"], "env": {"A": 1}})", "env.A"},
           {R"({"argv": ["/bin/true"], "shell": true})", "shell"},
           {R"({"argv": ["/bin/true"], "": true})", "\"\""}}) {
    auto [code, reply] = Post(*client, "/v1/sandboxes/" + id + "/exec", body);
    EXPECT_EQ(code, 400) << body << " -> " << reply.dump();
    EXPECT_EQ(reply["error"]["field"], field) << reply.dump();
  }
  auto health = client->Get("/v1/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(json::parse(health->body)["sandboxes"], 1) << "a bad request left a sandbox";
  EXPECT_EQ(json::parse(health->body)["execs_running"], 0);
}

// With --volume-root, a request's volumes are paths beneath it: an input read-only, an output
// copied back; nothing beyond the root is reached, by spelling or by a planted link.
TEST(Api, volumes_beneath_the_volume_root_go_in_and_out_and_nothing_leads_out_of_it) {
  TempDir root("smolbox-volume-root");
  TempDir outside("smolbox-outside");
  std::string secret = RandomToken();
  outside.Write("secret", secret);
  root.Write("case/in/data.csv", "a,b\n1,2\n");
  std::filesystem::create_directories(root.path() + "/case/out");
  std::filesystem::create_directories(root.path() + "/case/deep");
  std::filesystem::create_symlink(outside.path(), root.path() + "/case/link");
  std::filesystem::create_symlink(outside.path(), root.path() + "/case/deep/link");
  for (const std::string& dir : {root.path(), root.path() + "/case", root.path() + "/case/in", outside.path()}) {
    chmod(dir.c_str(), 0755);
  }
  ApiServer server({"--volume-root", root.path()});
  auto client = server.Client();
  auto volume = [](const std::string& source, const std::string& target, bool ro) {
    return json{{"source", source}, {"target", target}, {"mode", ro ? "ro" : "rw"}};
  };

  json spec = RunSpec("import os; data = open('/in/data.csv').read(); open('/out/n.txt', 'w').write(str(len(data)))\n"
                      "try:\n    open('/in/x', 'w')\nexcept OSError as e: print('ro', e.errno)");
  spec["mounts"] = {volume("case/in", "/in", true), volume("case/out", "/out", false)};
  auto [code, result] = Post(*client, "/v1/run", spec.dump());
  ASSERT_EQ(code, 200) << result.dump();
  EXPECT_EQ(result["status"], "exited") << result.dump();
  EXPECT_EQ(result["stdout"], "ro 30\n") << result.dump();
  EXPECT_EQ(ReadFileOrEmpty(root.path() + "/case/out/n.txt"), "8");

  // A created sandbox's output comes back after each exec, as through the CLI.
  json create = {{"backend", "ns"}, {"mounts", {volume("case/out", "/out", false)}}};
  auto [created, setup] = Post(*client, "/v1/sandboxes", create.dump());
  ASSERT_EQ(created, 201) << setup.dump();
  auto lines = Exec(*client, setup["id"], {{"argv", {"/bin/sh", "-c", "echo exec > /out/e.txt"}}});
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(ReadFileOrEmpty(root.path() + "/case/out/e.txt"), "exec\n");

  // Out of the root by spelling: refused before anything starts, naming the field.
  for (const char* source : {"/etc", "../etc", "case/../../etc", ""}) {
    json bad = RunSpec("print(1)");
    bad["mounts"] = {volume(source, "/in", true)};
    auto [bad_code, reply] = Post(*client, "/v1/run", bad.dump());
    EXPECT_EQ(bad_code, 400) << source << " -> " << reply.dump();
    EXPECT_EQ(reply["error"]["field"], "mounts[0].source") << reply.dump();
  }
  // Out of the root through a link, as the last part or on the way: the run does not start.
  for (const char* source : {"case/link", "case/deep/link/secret", "case/link/secret"}) {
    for (bool ro : {true, false}) {
      json bad = RunSpec("import sys; print(open('/in' if sys.argv[1] == 'f' else '/in/secret').read())");
      bad["argv"].push_back(std::string(source).ends_with("secret") ? "f" : "d");
      bad["mounts"] = {volume(source, "/in", ro)};
      auto [link_code, reply] = Post(*client, "/v1/run", bad.dump());
      EXPECT_EQ(link_code, 200) << reply.dump();
      EXPECT_EQ(reply["status"], "setup_error") << source << " ro=" << ro << " -> " << reply.dump();
      EXPECT_NE(reply.value("error", "").find("mounts[0].source"), std::string::npos) << reply.dump();
      EXPECT_EQ(reply.dump().find(secret), std::string::npos) << "the secret beyond the root was read";
    }
  }
  json bad_create = {{"backend", "ns"}, {"mounts", {volume("case/link", "/in", true)}}};
  auto [refused, why] = Post(*client, "/v1/sandboxes", bad_create.dump());
  EXPECT_EQ(refused, 422) << why.dump();
  EXPECT_NE(why.dump().find("symlink"), std::string::npos) << why.dump();
}

TEST(Api, a_sandbox_keeps_its_state_across_execs_and_its_removal_leaves_nothing) {
  ApiServer server;
  auto client = server.Client();
  std::string id = Create(*client, {{"backend", "ns"}, {"limits", {{"memory_mib", 128}}}, {"env", {{"KEPT", "yes"}}}});
  ASSERT_FALSE(id.empty());
  EXPECT_TRUE(OnHost(id));

  auto first = Exec(*client, id,
                    {{"argv", {kPython, "-c", "import os; open('/work/n', 'w').write(input()); print(os.environ['KEPT'])"}},
                     {"stdin", "seven\n"}});
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(Stream(first, "stdout"), "yes\n");
  EXPECT_EQ(first.back()["type"], "result");
  EXPECT_EQ(first.back()["result"]["status"], "exited") << first.back().dump();

  auto second = Exec(*client, id,
                     {{"argv", {kPython, "-c", "import os, sys; print(open('/work/n').read().strip(), os.environ['X'])"
                                               "; sys.stderr.write('\\u00e9\\u20ac\\n'); sys.exit(4)"}},
                      {"env", {{"X", "ex"}}}});
  ASSERT_FALSE(second.empty());
  EXPECT_EQ(Stream(second, "stdout"), "seven ex\n");
  EXPECT_EQ(Stream(second, "stderr"), "\u00e9\u20ac\n");
  EXPECT_EQ(second.back()["result"]["exit_code"], 4);

  auto one = client->Get(("/v1/sandboxes/" + id).c_str());
  ASSERT_TRUE(one);
  EXPECT_EQ(json::parse(one->body)["status"], "running");
  auto list = client->Get("/v1/sandboxes");
  ASSERT_TRUE(list);
  EXPECT_EQ(json::parse(list->body)["sandboxes"].size(), 1u);

  auto removed = client->Delete(("/v1/sandboxes/" + id).c_str());
  ASSERT_TRUE(removed);
  EXPECT_EQ(removed->status, 200);
  EXPECT_FALSE(OnHost(id));
  auto gone = client->Get(("/v1/sandboxes/" + id).c_str());
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->status, 404);
}

TEST(Api, files_go_in_and_out_byte_for_byte_and_a_planted_link_is_refused_not_followed) {
  ApiServer server;
  auto client = server.Client();
  std::string id = Create(*client, {{"backend", "ns"}, {"limits", {{"storage_mib", 16}}}});
  std::string files = "/v1/sandboxes/" + id + "/files";
  std::string bytes;
  for (int i = 0; i < 4096; ++i) bytes.push_back(static_cast<char>(i % 256));
  auto put = client->Put((files + "/work/in/data.bin").c_str(), bytes, "application/octet-stream");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 201) << put->body;
  auto got = client->Get((files + "/work/in/data.bin").c_str());
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(got->body, bytes);
  // The workload sees what was put, as the sandbox's user.
  auto seen = Exec(*client, id, {{"argv", {kPython, "-c", "import os; print(os.path.getsize('/work/in/data.bin'))"}}});
  EXPECT_EQ(Stream(seen, "stdout"), "4096\n");

  // A link the workload planted, to a file of its own: neither read through nor written through.
  Exec(*client, id, {{"argv", {"/bin/sh", "-c", "echo kept > /work/victim; ln -s /work/victim /work/link; mkdir /work/d"}}});
  for (const char* path : {"/work/link", "/work/d"}) {
    auto read = client->Get((files + path).c_str());
    ASSERT_TRUE(read);
    EXPECT_EQ(read->status, 409) << path << ": " << read->body;
    EXPECT_EQ(json::parse(read->body)["error"]["field"], "path");
    auto write = client->Put((files + path).c_str(), "replaced", "application/octet-stream");
    ASSERT_TRUE(write);
    EXPECT_EQ(write->status, 409) << path << ": " << write->body;
  }
  auto victim = client->Get((files + "/work/victim").c_str());
  ASSERT_TRUE(victim);
  EXPECT_EQ(victim->body, "kept\n");
  auto missing = client->Get((files + "/work/none").c_str());
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  for (const char* bad : {"/work/%2e%2e/etc/x", "/work//x", "/"}) {
    auto refused = client->Put((files + bad).c_str(), "x", "application/octet-stream");
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 400) << bad << ": " << refused->body;
  }
  // Over the sandbox's storage: refused, and nothing of it is left.
  auto full = client->Put((files + "/work/big").c_str(), std::string(20 << 20, 'x'), "application/octet-stream");
  ASSERT_TRUE(full);
  EXPECT_EQ(full->status, 507) << full->body;
  EXPECT_EQ(json::parse(full->body)["error"]["field"], "body");
  auto left = Exec(*client, id, {{"argv", {"/bin/sh", "-c", "ls -A /work"}}});
  EXPECT_EQ(Stream(left, "stdout"), "d\nin\nlink\nvictim\n");
}

TEST(Api, an_exec_streams_its_output_while_it_runs_and_its_limits_hold) {
  ApiServer server;
  auto client = server.Client();
  std::string id = Create(*client, {{"backend", "ns"}, {"limits", {{"memory_mib", 64}}}});
  auto start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::duration first_output{};
  std::string body;
  auto reply = PostStreaming(*client, "/v1/sandboxes/" + id + "/exec", json{{"argv", {kPython, "-c", "import time; print('first', flush=True); time.sleep(3); print('second')"}}}.dump(),
      [&](const char* data, size_t size) {
        if (body.empty()) first_output = std::chrono::steady_clock::now() - start;
        body.append(data, size);
        return true;
      });
  ASSERT_TRUE(reply);
  auto total = std::chrono::steady_clock::now() - start;
  auto lines = NdjsonLines(body);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.front()["data"], "first\n");
  EXPECT_LT(first_output, total - std::chrono::seconds(2)) << "the first line came only with the end";

  // The sandbox's limits hold for each exec: a timeout of its own, and the sandbox's memory.
  auto slow = Exec(*client, id, {{"argv", {kPython, "-c", "while True: pass"}}, {"timeout_ms", 1000}});
  ASSERT_FALSE(slow.empty());
  EXPECT_EQ(slow.back()["result"]["status"], "timeout");
  auto greedy = Exec(*client, id, {{"argv", {kPython, "-c", "held = [bytearray(1 << 20) for _ in range(512)]"}}});
  ASSERT_FALSE(greedy.empty());
  EXPECT_EQ(greedy.back()["result"]["status"], "memory_limit");
}

TEST(Api, a_client_that_goes_away_cancels_its_exec) {
  ApiServer server;
  auto client = server.Client();
  std::string id = Create(*client);
  std::string token = RandomToken();
  std::string seen;
  auto reply = PostStreaming(*client, "/v1/sandboxes/" + id + "/exec", json{{"argv", {kPython, "-c", "import sys, time\nwhile True: print(sys.argv[1], flush=True); time.sleep(0.1)", token}},
           {"timeout_ms", 600000}}
          .dump(),
      [&](const char* data, size_t size) {
        seen.append(data, size);
        return false;  // gone after the first output
      });
  EXPECT_NE(seen.find(token), std::string::npos);
  EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(token) == 0; }, std::chrono::seconds(30)))
      << "the workload outlived its client";
  // The sandbox is free again for the next exec.
  bool free_again = WaitUntil(
      [&] {
        auto next = client->Post(("/v1/sandboxes/" + id + "/exec").c_str(), R"({"argv": ["/bin/true"]})",
                                 "application/json");
        return next && next->status == 200;
      },
      std::chrono::seconds(30));
  EXPECT_TRUE(free_again);
}

// A run prints nothing until its result, so only the connection tells that its client left.
TEST(Api, a_client_that_goes_away_cancels_its_silent_run) {
  ApiServer server;
  std::string token = RandomToken();
  json spec = RunSpec("import sys, time\nwhile True: time.sleep(0.1)", {{"timeout_ms", 600000}});
  spec["argv"].push_back(token);
  auto left = PostThenHangUpWhen(server, "/v1/run", spec.dump(), [&] { return CountProcessesWith(token) > 0; });
  EXPECT_TRUE(left.running) << "the workload never ran";
  EXPECT_FALSE(left.answered) << "the run answered before its client gave up";
  EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(token) == 0; }, std::chrono::seconds(30)))
      << "the workload outlived its client";
  // Nothing of the run is left, and the server goes on serving.
  auto next = server.Client()->Post("/v1/run", RunSpec("print(42)").dump(), "application/json");
  ASSERT_TRUE(next);
  EXPECT_EQ(json::parse(next->body).value("stdout", ""), "42\n");
}

// A metric's value in GET /metrics' text, or -1 when it is not there.
double Metric(httplib::Client& client, const std::string& name) {
  auto reply = client.Get("/metrics");
  if (!reply) return -1;
  size_t at = reply->body.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(reply->body.substr(at + name.size() + 2));
}

TEST(Api, the_sandbox_cap_refuses_and_a_run_over_the_exec_cap_waits_its_turn_in_the_queue) {
  ApiServer server({"--max-sandboxes", "1", "--max-concurrent-execs", "1"});
  auto client = server.Client();
  std::string id = Create(*client);
  auto [code, reply] = Post(*client, "/v1/sandboxes", R"({"backend": "ns"})");
  EXPECT_EQ(code, 429);
  EXPECT_EQ(reply["error"]["field"], "max_sandboxes");
  EXPECT_EQ(ApiSandboxesOnHost().size() >= 1, true);

  // One exec holds the only slot; a run meanwhile waits in the queue, and runs once it is free.
  std::string token = RandomToken();
  std::atomic<bool> held_done{false};
  std::thread holder([&] {
    auto other = server.Client();
    Exec(*other, id, {{"argv", {kPython, "-c", "import sys, time; print(sys.argv[1], flush=True); time.sleep(3)", token}}});
    held_done = true;
  });
  EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(token) == 1; }, std::chrono::seconds(30)));
  std::pair<int, json> run;
  std::thread waiter([&] {
    auto other = server.Client();
    run = Post(*other, "/v1/run", RunSpec("print('after the queue')").dump());
  });
  EXPECT_TRUE(WaitUntil([&] { return Metric(*client, "smolbox_execs_queued") == 1; }, std::chrono::seconds(10)))
      << client->Get("/metrics")->body;
  waiter.join();
  holder.join();
  EXPECT_TRUE(held_done);
  EXPECT_EQ(run.first, 200) << run.second.dump();
  EXPECT_EQ(run.second.value("stdout", ""), "after the queue\n");
  EXPECT_EQ(Metric(*client, "smolbox_execs_queued"), 0);
  EXPECT_EQ(Metric(*client, "smolbox_queue_wait_seconds_count"), 1);
  EXPECT_GT(Metric(*client, "smolbox_queue_wait_seconds_sum"), 0.5) << "it waited for the 3 s exec";
}

// Past the queue's bound a request is refused at once, and a queued one whose own timeout, or
// the server's --max-queue-wait, passes first is refused then: each 429 with Retry-After, naming
// what filled up.
TEST(Api, past_the_queues_bound_its_own_timeout_or_the_longest_wait_a_request_gets_429_with_retry_after) {
  for (const auto& [queued, timeout_ms, wait, field] : {std::tuple{"0", 30000, "5m", "max_queued"},
                                                         std::tuple{"4", 500, "5m", "max_concurrent_execs"},
                                                         std::tuple{"4", 30000, "500ms", "max_queue_wait"}}) {
    ApiServer server({"--max-concurrent-execs", "1", "--max-queued", queued, "--max-queue-wait", wait});
    auto client = server.Client();
    std::thread holder([&] {
      auto other = server.Client();
      Post(*other, "/v1/run", RunSpec("import time; time.sleep(3)").dump());
    });
    EXPECT_TRUE(WaitUntil([&] { return Metric(*client, "smolbox_execs_running") == 1; }, std::chrono::seconds(30)));
    auto started = std::chrono::steady_clock::now();
    auto refused = client->Post("/v1/run", RunSpec("print(1)", {{"timeout_ms", timeout_ms}}).dump(), "application/json");
    auto waited = std::chrono::steady_clock::now() - started;
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 429) << refused->body;
    EXPECT_EQ(refused->get_header_value("Retry-After"), "1");
    EXPECT_EQ(json::parse(refused->body)["error"]["field"], field) << refused->body;
    if (std::string(queued) == "4") {
      EXPECT_GE(waited, std::chrono::milliseconds(450)) << "it waited its timeout or the longest wait";
    } else {
      EXPECT_LT(waited, std::chrono::seconds(2)) << "refused at once";
    }
    holder.join();
  }
}

TEST(Api, bad_queue_flags_are_refused_naming_the_flag_before_anything_starts) {
  for (const auto& [flag, value] : {std::pair{"--max-queue-wait", "0"}, std::pair{"--max-queue-wait", "soon"},
                                    std::pair{"--max-queued", "-1"}}) {
    Invocation bad = RunSmolbox({"serve", "--listen", "unix:/nonexistent/api.sock", flag, value});
    EXPECT_EQ(bad.exit_code, 125) << flag << " " << value;
    EXPECT_NE(bad.err.find(flag), std::string::npos) << bad.err;
  }
}

TEST(Api, a_killed_server_leaves_no_sandbox_running_and_the_next_start_sweeps_them) {
  std::string token = RandomToken();
  std::string run_token = RandomToken();
  std::string id;
  {
    ApiServer server;
    auto client = server.Client();
    id = Create(*client);
    // An exec in flight when the server dies.
    std::thread exec([&] {
      PostStreaming(*server.Client(), "/v1/sandboxes/" + id + "/exec",
                    json{{"argv", {kPython, "-c", "import time; time.sleep(600)", token}}, {"timeout_ms", 600000}}.dump(),
                    [](const char*, size_t) { return true; });
    });
    // And a one-shot run.
    std::thread run([&] {
      json spec = RunSpec("import time; time.sleep(600)", {{"timeout_ms", 600000}});
      spec["argv"].push_back(run_token);
      Post(*server.Client(), "/v1/run", spec.dump());
    });
    EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(token) == 1; }, std::chrono::seconds(30)));
    EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(run_token) == 1; }, std::chrono::seconds(30)));
    EXPECT_EQ(server.Stop(SIGKILL), 128 + SIGKILL);
    exec.join();
    run.join();
  }
  EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(run_token) == 0; }, std::chrono::seconds(30)))
      << "the run outlived its server";
  EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(token) == 0; }, std::chrono::seconds(30)))
      << "the sandbox outlived its server";
  ApiServer next;
  EXPECT_TRUE(WaitUntil([&] { return !OnHost(id); }, std::chrono::seconds(10))) << "the next start left " << id;
}

TEST(Api, sigterm_lets_an_exec_in_flight_finish_then_removes_every_sandbox) {
  ApiServer server;
  auto client = server.Client();
  std::string id = Create(*client);
  std::string body;
  std::thread exec([&] {
    auto reply = PostStreaming(*server.Client(), "/v1/sandboxes/" + id + "/exec", json{{"argv", {kPython, "-c", "import time; print('started', flush=True); time.sleep(2); print('finished')"}}}.dump(),
        [&](const char* data, size_t size) {
          body.append(data, size);
          return true;
        });
  });
  ASSERT_TRUE(WaitUntil([&] { return body.find("started") != std::string::npos; }, std::chrono::seconds(30)));
  EXPECT_EQ(server.Stop(SIGTERM), 0);
  exec.join();
  auto lines = NdjsonLines(body);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(Stream(lines, "stdout"), "started\nfinished\n");
  EXPECT_EQ(lines.back()["result"]["status"], "exited");
  EXPECT_FALSE(OnHost(id));
  EXPECT_FALSE(std::filesystem::exists(server.socket_path())) << "the socket outlived the server";
}

// ---------------------------------------------------------------------------
// TCP: a bearer token always, TLS off loopback.

std::string TokenFile(const TempDir& dir, const std::string& token, mode_t mode = 0600) {
  std::string path = dir.path() + "/token";
  WriteFile(path, token + "\n");
  chmod(path.c_str(), mode);
  return path;
}

TEST(ApiTcp, a_tcp_listener_needs_a_private_token_file_and_tls_off_loopback) {
  TempDir dir("api-tcp");
  std::string token = RandomToken() + RandomToken();
  Invocation no_token = RunSmolbox({"serve", "--listen", "tcp:127.0.0.1:0"});
  EXPECT_EQ(no_token.exit_code, 125);
  EXPECT_NE(no_token.err.find("--token-file"), std::string::npos) << no_token.err;
  Invocation readable = RunSmolbox({"serve", "--listen", "tcp:127.0.0.1:0", "--token-file", TokenFile(dir, token, 0644)});
  EXPECT_EQ(readable.exit_code, 125);
  EXPECT_NE(readable.err.find("chmod 600"), std::string::npos) << readable.err;
  // Refused before anything binds: the address is never listened on.
  Invocation open = RunSmolbox({"serve", "--listen", "tcp:0.0.0.0:0", "--token-file", TokenFile(dir, token)});
  EXPECT_EQ(open.exit_code, 125);
  EXPECT_NE(open.err.find("--tls-cert"), std::string::npos) << open.err;
  Invocation bad = RunSmolbox({"serve", "--listen", "tcp:example.com:80", "--token-file", TokenFile(dir, token)});
  EXPECT_EQ(bad.exit_code, 125);
  EXPECT_NE(bad.err.find("--listen"), std::string::npos) << bad.err;
}

TEST(ApiTcp, a_request_without_the_bearer_token_is_refused) {
  TempDir dir("api-tcp");
  std::string token = RandomToken() + RandomToken();
  ApiServer server({"--token-file", TokenFile(dir, token)}, "tcp:127.0.0.1:0");
  ASSERT_GT(server.port(), 0) << server.process().err();
  httplib::Client client("127.0.0.1", server.port());
  auto none = client.Get("/v1/health");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(json::parse(none->body)["error"]["field"], "Authorization");
  auto wrong = client.Get("/v1/health", {{"Authorization", "Bearer " + token.substr(1) + "x"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  auto run = client.Post("/v1/run", {{"Authorization", "Bearer " + token.substr(1) + "x"}}, RunSpec("print(1)").dump(),
                         "application/json");
  ASSERT_TRUE(run);
  EXPECT_EQ(run->status, 401) << "a refused request must not run";
  auto right = client.Get("/v1/health", {{"Authorization", "Bearer " + token}});
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 200);
}

TEST(ApiTcp, tls_serves_with_the_given_certificate) {
  TempDir dir("api-tls");
  std::string cert = dir.path() + "/cert.pem", key = dir.path() + "/key.pem";
  ProgramRun made = RunProgram({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
                                "-days", "1", "-keyout", key, "-out", cert});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  std::string token = RandomToken() + RandomToken();
  ApiServer server({"--token-file", TokenFile(dir, token), "--tls-cert", cert, "--tls-key", key}, "tcp:127.0.0.1:0");
  ASSERT_GT(server.port(), 0) << server.process().err();
  httplib::SSLClient tls("127.0.0.1", server.port());
  tls.set_ca_cert_path(cert.c_str());
  tls.enable_server_certificate_verification(false);  // issued to localhost, dialled by address
  auto health = tls.Get("/v1/health", {{"Authorization", "Bearer " + token}});
  ASSERT_TRUE(health) << httplib::to_string(health.error());
  EXPECT_EQ(health->status, 200);
  httplib::Client plain("127.0.0.1", server.port());
  auto cleartext = plain.Get("/v1/health", {{"Authorization", "Bearer " + token}});
  EXPECT_FALSE(cleartext && cleartext->status == 200) << "the token went in the clear";
}

}  // namespace
}  // namespace smolbox::testing
