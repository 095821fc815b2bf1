// Profiles of "kind": "http": a case renders to the JSON requests each API is given, bad http
// profiles are errors naming the field, and http-call makes a plan's calls against a real HTTP
// server, the result's reply out and a teardown call made even after a failure.
#include "launch/http_profile.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <sstream>
#include <string>
#include <thread>

#include "launch/http_call.h"
#include "test_support.h"

namespace smolvm_check {
namespace {

using nlohmann::json;
using smolbox::testing::TempDir;

const std::string kProfiles = std::string(SMOLVM_CHECK_SOURCE_DIR) + "/conformance/profiles";

// A case with a ro and a rw mount, env, stdin and some limits, placed beneath /root-of-run.
Case CsvCase() {
  Case c;
  c.id = "functional.csv.python";
  c.lang = "python";
  c.payload = "/cat/python/csv.py";
  c.args = {"{mount:in}/data.csv"};
  c.stdin_data = "text";
  c.env = {{"GREETING", "hi"}};
  c.limits = {{"timeout_ms", 2500}, {"cpus", 500}};
  c.mounts = {{"in", "/in", true, {}}, {"out", "/out", false, {}}};
  return c;
}

Placement CsvPlacement() {
  Placement p;
  p.mount_sources = {{"in", "/run-root/case/in"}, {"out", "/run-root/case/out"}};
  p.payload_dir = "/cat";
  p.payload_source = "/run-root/payloads";
  p.marker = "MARK";
  return p;
}

const HttpRunValues kValues{"/run-root/api.sock", "/run-root", "abc123"};

Profile Load(const std::string& name) {
  setenv("SMOLBOX", "/bin/true", 1);
  auto profile = LoadProfile(name, kProfiles);
  unsetenv("SMOLBOX");
  EXPECT_TRUE(profile) << profile.error().ToString();
  return profile ? *profile : Profile{};
}

json Plan(const Profile& profile, const Case& c = CsvCase()) {
  auto plan = RenderHttpPlan(profile, c, CsvPlacement(), kValues);
  EXPECT_TRUE(plan) << plan.error().ToString();
  return plan ? *plan : json();
}

TEST(HttpProfile, a_case_becomes_the_run_spec_smolbox_run_would_build) {
  Profile profile = Load("smolbox:api");
  json plan = Plan(profile);
  EXPECT_EQ(plan["endpoint"], "unix:/run-root/api.sock");
  ASSERT_EQ(plan["calls"].size(), 1u);
  const json& call = plan["calls"][0];
  EXPECT_EQ(call["method"], "POST");
  EXPECT_EQ(call["path"], "/v1/run");
  EXPECT_TRUE(call["result"].get<bool>());
  json expected = {
      {"backend", "auto"},
      {"accel", "auto"},
      {"image", "host"},
      {"argv", {"/usr/bin/python3", "-u", "/payload/python/csv.py", "/in/data.csv", "MARK"}},
      {"env", {{"GREETING", "hi"}}},
      {"stdin", "text"},
      {"workdir", "/work"},
      // The payloads' copy first; every source relative to the server's volume root.
      {"mounts",
       {{{"source", "payloads"}, {"target", "/payload"}, {"mode", "ro"}},
        {{"source", "case/in"}, {"target", "/in"}, {"mode", "ro"}},
        {{"source", "case/out"}, {"target", "/out"}, {"mode", "rw"}}}},
      // Only the limits the case sets, as numbers; no user, no egress: left out.
      {"limits", {{"timeout_ms", 2500}, {"cpus", 0.5}}}};
  EXPECT_EQ(call["body"], expected) << call["body"].dump(2);
}

TEST(HttpProfile, a_root_case_and_an_egress_policy_are_given_and_a_bare_case_has_none) {
  Profile profile = Load("smolbox:api");
  Case c = CsvCase();
  c.user = "root";
  c.egress = CaseEgress{false, {"api.allowed.test:80"}, {"10.20.0.0/16"}, {}, 4096};
  json body = Plan(profile, c)["calls"][0]["body"];
  EXPECT_EQ(body["user"], "root");
  EXPECT_EQ(body["egress"], (json{{"allow_hosts", {"api.allowed.test:80"}}, {"allow_cidrs", {"10.20.0.0/16"}}, {"limit_bytes", 4096}}));
  Case bare;
  bare.id = "x.bare";
  bare.lang = "sh";
  bare.payload = "/cat/sh/x.sh";
  json plain = Plan(profile, bare)["calls"][0]["body"];
  for (const char* absent : {"env", "stdin", "user", "limits", "egress"}) EXPECT_FALSE(plain.contains(absent)) << absent << " in " << plain.dump();
  EXPECT_TRUE(profile.egress && !profile.egress->deny_cidr.empty()) << "smolbox:api can say deny_cidrs";
}

TEST(HttpProfile, a_case_that_trusts_the_test_ca_sends_its_pem_as_ca_bundle) {
  Profile profile = Load("smolbox:api");
  ASSERT_TRUE(profile.egress && !profile.egress->ca_bundle.empty()) << "smolbox:api can say ca_bundle";
  TempDir dir;
  const std::string pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  Case c = CsvCase();
  c.egress = CaseEgress{false, {"api.allowed.test"}, {}, {}, {}, true};
  Placement placement = CsvPlacement();
  placement.test_ca_path = dir.Write("ca.pem", pem);
  auto plan = RenderHttpPlan(profile, c, placement, kValues);
  ASSERT_TRUE(plan) << plan.error().ToString();
  EXPECT_EQ((*plan)["calls"][0]["body"]["ca_bundle"], pem);
  c.egress->trust_test_ca = false;
  EXPECT_FALSE(Plan(profile, c)["calls"][0]["body"].contains("ca_bundle"));
  // A trusting case with no test internet to take the CA from is an error, not a run without it.
  c.egress->trust_test_ca = true;
  auto missing = RenderHttpPlan(profile, c, CsvPlacement(), kValues);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().ToString().find("ca_bundle: the case trusts the test CA, but there is no test internet"), std::string::npos)
      << missing.error().ToString();
}

TEST(HttpProfile, smolvm_serve_creates_starts_execs_and_always_deletes_its_machine) {
  Profile profile = Load("smolvm-serve");
  EXPECT_TRUE(profile.syntax_only);
  json plan = Plan(profile);
  ASSERT_EQ(plan["calls"].size(), 4u);
  EXPECT_EQ(plan["calls"][0]["path"], "/api/v1/machines");
  EXPECT_EQ(plan["calls"][0]["body"]["name"], "abc123");
  EXPECT_EQ(plan["calls"][0]["body"]["cpus"], 1) << "0.5 CPU is rounded up to a whole vCPU";
  EXPECT_EQ(plan["calls"][0]["body"]["mounts"][1], (json{{"source", "/run-root/case/in"}, {"target", "/in"}, {"readonly", true}}));
  EXPECT_EQ(plan["calls"][2]["path"], "/api/v1/machines/abc123/exec");
  EXPECT_EQ(plan["calls"][2]["body"]["timeout_secs"], 3);
  EXPECT_TRUE(plan["calls"][2]["result"].get<bool>());
  EXPECT_EQ(plan["calls"][3]["method"], "DELETE");
  EXPECT_TRUE(plan["calls"][3]["always"].get<bool>());
  EXPECT_EQ(plan["result"], "exit_code");
  EXPECT_EQ(plan["result_fields"]["exit_code"], "/exitCode");
}

// A good http profile, to be broken one field at a time.
json GoodHttpProfile() {
  return {{"name", "h"},
          {"kind", "http"},
          {"endpoint", "unix:{api_socket}"},
          {"calls", {{{"method", "POST"}, {"path", "/run"}, {"result", true},
                      {"body", {{"argv", "{argv}"}, {"env", "{env}"}, {"mounts", "{mounts}"}, {"t", "{timeout_ms}"}}}}}},
          {"mount", {{"ro", {{"s", "{source}"}}}, {"rw", {{"s", "{source}"}}}}},
          {"unsupported", {"cpu_ms", "memory_mib", "cpus", "pids", "storage_mib", "output_bytes", "files"}},
          {"result", "smolbox_json"}};
}

std::string ParseError(const json& profile) {
  auto parsed = ParseProfile(profile.dump(), "test.json");
  return parsed ? "<parsed>" : parsed.error().ToString();
}

TEST(HttpProfile, bad_http_profiles_are_errors_naming_the_field) {
  EXPECT_EQ(ParseError(GoodHttpProfile()), "<parsed>");
  struct Bad {
    std::function<void(json&)> change;
    std::string message;
  };
  Bad bad[] = {
      {[](json& p) { p["endpoint"] = "tcp:1.2.3.4:80"; }, "endpoint: must be unix:PATH or http://HOST:PORT"},
      {[](json& p) { p.erase("calls"); }, "calls: is required in an http profile"},
      {[](json& p) { p["calls"] = json::array(); }, "calls: must be a non-empty array"},
      {[](json& p) { p["calls"][0]["method"] = "PATCH"; }, "calls[0].method: must be GET, POST, PUT or DELETE"},
      {[](json& p) { p["calls"][0]["path"] = "run"; }, "calls[0].path: must start with /"},
      {[](json& p) { p["calls"][0]["result"] = false; }, "calls: need exactly one call with \"result\": true"},
      {[](json& p) { p["calls"][0]["body"]["again"] = "{argv}"; }, "calls: need {argv} exactly once"},
      {[](json& p) { p["calls"][0]["body"]["x"] = "--mem={memory_mib}"; }, "calls[0].body.x: {memory_mib} stands for a JSON value"},
      {[](json& p) { p["calls"][0]["body"]["x"] = "{bogus}"; }, "calls[0].body.x: unknown placeholder {bogus}"},
      {[](json& p) { p["calls"][0]["path"] = "/{argv}"; }, "calls[0].path: {argv} stands for a JSON value"},
      {[](json& p) { p["calls"][0]["body"].erase("env"); }, "calls: need {env}"},
      {[](json& p) { p["unsupported"] = {"cpu_ms"}; }, "limit \"memory_mib\" is neither mapped nor declared unsupported"},
      {[](json& p) { p["unsupported"].push_back("timeout_ms"); }, "limit \"timeout_ms\" is both mapped"},
      {[](json& p) { p["command"] = {"{argv...}"}; }, "command: has no place in an http profile"},
      {[](json& p) { p["kind"] = "grpc"; }, "kind: must be command or http"},
      {[](json& p) { p["mount"]["ro"] = {{"s", "{key}"}}; }, "mount.ro.s: unknown placeholder {key}"},
      {[](json& p) { p["result"] = "exit_code"; }, "result_fields: needs exit_code"},
      {[](json& p) { p["result_fields"] = {{"exit_code", "no-slash"}}; }, "result_fields.exit_code: \"no-slash\" is no JSON pointer"},
      {[](json& p) { p["user"] = {{"root", {"--user", "root"}}}; }, "user.root"},
      {[](json& p) { p["variables"] = {{"api_socket", "/x"}}; }, "variables: \"api_socket\" cannot be a variable name"},
      {[](json& p) { p["paths"] = "host"; }, "paths: an http profile's sandbox has paths of its own"},
  };
  for (const Bad& b : bad) {
    json profile = GoodHttpProfile();
    b.change(profile);
    EXPECT_NE(ParseError(profile).find(b.message), std::string::npos) << profile.dump() << "\n-> " << ParseError(profile);
  }
  json command = {{"name", "c"}, {"command", {"{argv...}"}}, {"paths", "host"}, {"result", "exit_code"}, {"calls", json::array()}};
  EXPECT_NE(ParseError(command).find("calls: belongs to an http profile"), std::string::npos) << ParseError(command);
}

// ---------------------------------------------------------------------------
// http-call, against a real HTTP server on a unix socket of the test's own.

class HttpCallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Post("/run", [this](const httplib::Request& req, httplib::Response& res) {
      seen_ += "run " + req.body + "\n";
      res.set_content(R"({"status":"exited","exit_code":0,"stdout":"out"})", "application/json");
    });
    server_.Post("/fail", [this](const httplib::Request&, httplib::Response& res) {
      seen_ += "fail\n";
      res.status = 422;
      res.set_content(R"({"error":"no"})", "application/json");
    });
    server_.Post("/exec", [this](const httplib::Request&, httplib::Response& res) {
      seen_ += "exec\n";
      res.set_content(R"({"exitCode":3,"stdout":"o\n","stderr":"e\n"})", "application/json");
    });
    server_.Delete("/box", [this](const httplib::Request&, httplib::Response& res) {
      seen_ += "delete\n";
      res.set_content("{}", "application/json");
    });
    server_.set_address_family(AF_UNIX);
    ASSERT_TRUE(server_.bind_to_port(socket_, 80));
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // Until it runs, a stop() would be lost, and the join in TearDown would wait forever.
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void TearDown() override {
    server_.stop();
    thread_.join();
  }

  int Call(const json& calls, const json& extra = json::object()) {
    json plan = {{"endpoint", "unix:" + socket_}, {"calls", calls}, {"result", "smolbox_json"}};
    plan.update(extra);
    out_.str("");
    err_.str("");
    return RunHttpCall(plan.dump(), out_, err_);
  }

  TempDir dir_{"http-call"};
  std::string socket_ = dir_.path() + "/api.sock";
  httplib::Server server_;
  std::thread thread_;
  std::string seen_;
  std::ostringstream out_, err_;
};

TEST_F(HttpCallTest, makes_the_calls_in_order_and_prints_the_results_reply) {
  EXPECT_EQ(Call({{{"method", "POST"}, {"path", "/run"}, {"body", {{"argv", {"x"}}}}, {"result", true}},
                  {{"method", "DELETE"}, {"path", "/box"}}}),
            0)
      << err_.str();
  EXPECT_EQ(seen_, "run {\"argv\":[\"x\"]}\ndelete\n");
  EXPECT_EQ(out_.str(), R"({"status":"exited","exit_code":0,"stdout":"out"})");
}

TEST_F(HttpCallTest, a_failed_call_stops_the_rest_but_the_teardown_and_names_the_status) {
  EXPECT_EQ(Call({{{"method", "POST"}, {"path", "/fail"}},
                  {{"method", "POST"}, {"path", "/run"}, {"result", true}},
                  {{"method", "DELETE"}, {"path", "/box"}, {"always", true}}}),
            125);
  EXPECT_EQ(seen_, "fail\ndelete\n");
  EXPECT_NE(err_.str().find("POST /fail: HTTP 422: {\"error\":\"no\"}"), std::string::npos) << err_.str();
  EXPECT_EQ(out_.str(), "");
}

TEST_F(HttpCallTest, an_exit_code_result_takes_its_fields_from_the_reply) {
  json fields = {{"exit_code", "/exitCode"}, {"stdout", "/stdout"}, {"stderr", "/stderr"}};
  EXPECT_EQ(Call({{{"method", "POST"}, {"path", "/exec"}, {"result", true}}}, {{"result", "exit_code"}, {"result_fields", fields}}), 3);
  EXPECT_EQ(out_.str(), "o\n");
  EXPECT_EQ(err_.str(), "e\n");
  // A reply without the exit code is a failure, not a 0.
  EXPECT_EQ(Call({{{"method", "POST"}, {"path", "/run"}, {"result", true}}},
                 {{"result", "exit_code"}, {"result_fields", {{"exit_code", "/exitCode"}}}}),
            125);
  EXPECT_NE(err_.str().find("no whole number at /exitCode"), std::string::npos) << err_.str();
}

TEST_F(HttpCallTest, a_bad_plan_or_an_endpoint_nobody_serves_is_a_failure_that_says_so) {
  std::ostringstream out, err;
  EXPECT_EQ(RunHttpCall("{", out, err), 125);
  EXPECT_NE(err.str().find("the plan"), std::string::npos) << err.str();
  json plan = {{"endpoint", "unix:" + dir_.path() + "/nobody.sock"}, {"calls", {{{"method", "GET"}, {"path", "/"}, {"result", true}}}}};
  EXPECT_EQ(RunHttpCall(plan.dump(), out, err), 125);
  EXPECT_NE(err.str().find("GET /: "), std::string::npos) << err.str();
}

}  // namespace
}  // namespace smolvm_check
