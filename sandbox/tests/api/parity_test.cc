// Every field of the RunSpec has the same effect through each front end: `smolbox run` with its
// flags, POST /v1/run with the field, the Python SDK's smolbox.run with it as a keyword,
// POST /v1/sandboxes with it and then an exec, and the MCP tools run_code, and create_sandbox
// and exec. Each case runs a probe that prints what the field changed, on ns, and they must
// agree with each other and with what the case expects. A field added to the spec later without
// a case here (or a reason it has none) fails the first test, and one the MCP tools do not take
// the second.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "api_server.h"
#include "mcp_client.h"
#include "python_sdk_run.h"
#include "smolbox/spec.h"

namespace smolbox::testing {
namespace {

using nlohmann::json;

constexpr const char* kPython = "/usr/bin/python3";

struct ParityCase {
  std::string field;               // as RunSpecFieldNames() names it
  std::vector<std::string> flags;  // smolbox run's words for it
  json spec;                       // the spec's fragment for it, for /v1/run and /v1/sandboxes
  std::string code;                // the probe, a Python program
  std::string status = "exited";   // what every path must end with
  std::string stdout_text;         // and print (unless status says a limit ended it)
  bool sandbox_path = true;        // false: a run's field only, which /v1/sandboxes refuses
  json exec = json::object();      // what an exec into the sandbox adds (stdin is an exec's)
};

// Fields with no case here, and where their parity is checked instead.
const std::map<std::string, std::string> kCheckedElsewhere = {
    {"image", "ImageRun.the_api_runs_a_store_image_and_makes_sandboxes_of_it_as_the_cli_does, through every path "
              "here (needs an imported image)"},
    {"egress", "EgressParity.an_allowed_host_has_the_same_effect_through_the_cli_the_api_a_sandbox_the_sdk_and_mcp, "
               "and the battery through smolbox:api runs every egress case as a POST /v1/run (needs the test internet)"},
    {"accel", "vm only: the battery through smolbox:api-vm-tcg"},
    {"vm_snapshot", "vm only: --no-snapshot is the smolbox:vm-fresh profile"},
    {"prewarm", "vm and created sandboxes only: ApiPrewarm.*, and PrewarmPython.* for smolbox create --prewarm"},
    {"network", "only \"none\", the default of every path"},
    {"stdin_file", "a host path, which the API refuses (RefuseHostPaths): its API path is stdin, the case \"stdin\""},
    {"argv", "every case's probe"},
};

// A certificate's shape (the store checks the PEM, not the DER); its line is looked for.
const std::string kPem =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBszCCAVmgAwIBAgIUW7mQpXcZ0a2n2bYtPmEwUOYVdrgwCgYIKoZIzj0EAwIw\n"
    "-----END CERTIFICATE-----\n";

std::vector<ParityCase> Cases(const std::string& volume_file) {
  std::vector<ParityCase> c;
  c.push_back({"backend", {"--backend", "ns"}, {{"backend", "ns"}}, "print('ran')", "exited", "ran\n"});
  c.push_back({"env", {"-e", "PARITY=yes"}, {{"env", {{"PARITY", "yes"}}}},
               "import os; print(os.environ['PARITY'])", "exited", "yes\n"});
  c.push_back({"workdir", {"-w", "/tmp"}, {{"workdir", "/tmp"}}, "import os; print(os.getcwd())", "exited", "/tmp\n"});
  c.push_back({"user", {"--user", "77:88"}, {{"user", "77:88"}}, "import os; print(os.getuid(), os.getgid())", "exited",
               "77 88\n"});
  ParityCase stdin_case{"stdin", {"--stdin", volume_file}, {{"stdin", "from stdin\n"}}, "print(input())", "exited",
                        "from stdin\n"};
  stdin_case.exec = {{"stdin", "from stdin\n"}};
  stdin_case.spec = json::object();  // a sandbox takes none; the run's is below
  c.push_back(stdin_case);
  c.push_back({"entrypoint", {"--entrypoint", kPython}, {{"entrypoint", {kPython}}}, "", "exited", "front\n", false});
  c.push_back({"mounts", {"-v", "shared:/data:ro"}, {{"mounts", {{{"source", "shared"}, {"target", "/data"}, {"mode", "ro"}}}}},
               "import os\nprint(open('/data/in.txt').read().strip(), end=' ')\n"
               "try:\n    open('/data/x', 'w')\n    print('written')\nexcept OSError:\n    print('read-only')",
               "exited", "shared input read-only\n"});
  c.push_back({"ca_bundle", {"--ca-bundle", volume_file + ".pem"}, {{"ca_bundle", kPem}},
               "import os\nb = open(os.environ['SSL_CERT_FILE']).read()\nprint('MIIBszCCAVmgAwIBAgIU' in b)", "exited",
               "True\n"});
  c.push_back({"limits.timeout_ms", {"--timeout", "1s"}, {{"limits", {{"timeout_ms", 1000}}}}, "while True: pass", "timeout", ""});
  c.push_back({"limits.cpu_ms", {"--cpu-time", "300ms"}, {{"limits", {{"cpu_ms", 300}}}}, "while True: pass", "cpu_limit", ""});
  c.push_back({"limits.memory_mib", {"--mem", "64M"}, {{"limits", {{"memory_mib", 64}}}},
               "held = [bytearray(1 << 20) for _ in range(256)]", "memory_limit", ""});
  c.push_back({"limits.output_bytes", {"--output-limit", "1K"}, {{"limits", {{"output_bytes", 1024}}}},
               "import sys\nfor _ in range(64): sys.stdout.write('x' * 1024); sys.stdout.flush()", "output_limit", ""});
  c.push_back({"limits.pids", {"--pids", "8"}, {{"limits", {{"pids", 8}}}},
               "import os, time\nn = 0\nfor _ in range(16):\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
               "    if pid == 0:\n        time.sleep(2)\n        os._exit(0)\n    n += 1\nprint(n < 16)",
               "exited", "True\n"});
  c.push_back({"limits.files", {"--files", "16"}, {{"limits", {{"files", 16}}}},
               "import os\nn = 0\ntry:\n    for _ in range(64):\n        os.open('/dev/null', os.O_RDONLY)\n        n += 1\n"
               "except OSError:\n    pass\nprint(n < 64)",
               "exited", "True\n"});
  c.push_back({"limits.storage_mib", {"--storage", "16M"}, {{"limits", {{"storage_mib", 16}}}},
               "try:\n    open('/work/big', 'wb').write(b'x' * (32 << 20))\n    print('written')\nexcept OSError:\n    print('full')",
               "exited", "full\n"});
  // A rate, not an outcome: that every path takes it and runs; the battery's cpu cases measure it.
  c.push_back({"limits.cpus", {"--cpus", "0.5"}, {{"limits", {{"cpus", 0.5}}}}, "print('ran')", "exited", "ran\n"});
  return c;
}

std::vector<std::string> ProbeArgv(const ParityCase& c) {
  if (c.field == "entrypoint") return {"-c", "print('front')"};
  return {kPython, "-c", c.code};
}

// status and, for a run that exited, its stdout: what the paths must share.
std::string Outcome(const json& result) {
  if (!result.is_object()) return "no result: " + result.dump();
  std::string status = result.value("status", "?");
  if (status != "exited") return status;
  return status + " " + std::to_string(result.value("exit_code", -1)) + " " + result.value("stdout", "");
}

class RunSpecParity : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFile(root_.path() + "/shared/in.txt", "shared input\n");
    WriteFile(root_.path() + "/stdin.txt", "from stdin\n");
    WriteFile(root_.path() + "/stdin.txt.pem", kPem);
    chmod(root_.path().c_str(), 0755);
  }

  TempDir root_{"parity-root"};
};

TEST(RunSpecFields, every_field_has_a_parity_case_or_a_reason_it_is_checked_elsewhere) {
  std::set<std::string> covered;
  for (const ParityCase& c : Cases("/x")) covered.insert(c.field);
  for (const std::string& field : RunSpecFieldNames()) {
    EXPECT_TRUE(covered.contains(field) || kCheckedElsewhere.contains(field))
        << "the RunSpec field " << field << " has no parity case in parity_test.cc";
  }
  for (const auto& [field, unused] : kCheckedElsewhere) {
    auto names = RunSpecFieldNames();
    EXPECT_NE(std::find(names.begin(), names.end(), field), names.end()) << field << " is no longer a field";
  }
}

// The MCP tools take the spec's fields by name: run_code every one an API run takes but its
// argv (the tool's command or code), host paths and a created sandbox's own (prewarm),
// create_sandbox every one a sandbox takes.
TEST(RunSpecFields, the_mcp_tools_take_every_field_the_api_does) {
  McpClient mcp;
  json tools = mcp.Request("tools/list", json::object())["result"]["tools"];
  json run_code, create_sandbox;
  for (const json& tool : tools) {
    if (tool["name"] == "run_code") run_code = tool["inputSchema"]["properties"];
    if (tool["name"] == "create_sandbox") create_sandbox = tool["inputSchema"]["properties"];
  }
  ASSERT_TRUE(run_code.is_object() && create_sandbox.is_object()) << tools.dump();
  const std::set<std::string> run_only = {"stdin", "entrypoint"};
  const std::set<std::string> sandbox_only = {"prewarm"};
  for (const std::string& name : RunSpecFieldNames()) {
    std::string top = name.substr(0, name.find('.'));
    if (top == "argv" || top == "stdin_file") continue;
    EXPECT_EQ(run_code.contains(top), !sandbox_only.contains(top)) << "run_code and the RunSpec field " << top;
    if (!run_only.contains(top)) {
      EXPECT_TRUE(create_sandbox.contains(top)) << "create_sandbox does not take the RunSpec field " << top;
    }
  }
  EXPECT_TRUE(run_code.contains("command") && run_code.contains("code"));
}

// A tool's result as a run's: its structuredContent.
json ToolOutcome(const json& tool_result) { return tool_result.value("structuredContent", json()); }

TEST_F(RunSpecParity, each_field_has_the_same_effect_through_the_cli_a_run_the_sdk_a_sandboxs_exec_and_mcp) {
  ApiServer server({"--volume-root", root_.path()});
  ASSERT_FALSE(server.socket_path().empty()) << server.process().err();
  auto client = server.Client();
  McpClient mcp({"--volume-root", root_.path()});
  for (const ParityCase& c : Cases(root_.path() + "/stdin.txt")) {
    SCOPED_TRACE(c.field);
    std::vector<std::string> argv = ProbeArgv(c);
    std::string expected = c.status == "exited" ? "exited 0 " + c.stdout_text : c.status;

    std::vector<std::string> args = {"run", "--json", "--volume-root", root_.path()};
    if (c.field != "backend") args.insert(args.end(), {"--backend", "ns"});
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    args.push_back("--");
    args.insert(args.end(), argv.begin(), argv.end());
    Invocation cli = RunSmolbox(args);
    EXPECT_EQ(Outcome(cli.result), expected) << "smolbox run: " << cli.err;

    json run = c.spec;
    run["backend"] = "ns";
    run["argv"] = argv;
    if (c.field == "stdin") run["stdin"] = "from stdin\n";
    auto [run_code, run_result] = Post(*client, "/v1/run", run.dump());
    EXPECT_EQ(run_code, 200) << run_result.dump();
    EXPECT_EQ(Outcome(run_result), expected) << "POST /v1/run " << run.dump();

    std::string sdk_error;
    EXPECT_EQ(Outcome(RunThroughPythonSdk(server.address(), run, &sdk_error)), expected) << "the Python SDK: " << sdk_error;

    json tool_run = c.spec;
    tool_run["command"] = argv;
    if (c.field == "stdin") tool_run["stdin"] = "from stdin\n";
    EXPECT_EQ(Outcome(ToolOutcome(mcp.Call("run_code", tool_run))), expected) << "MCP run_code " << tool_run.dump();

    json create = c.spec;
    create["backend"] = "ns";
    auto [create_code, created] = Post(*client, "/v1/sandboxes", create.dump());
    json mcp_created = mcp.Call("create_sandbox", c.spec);
    if (!c.sandbox_path) {
      EXPECT_EQ(create_code, 400) << created.dump();
      EXPECT_EQ(created["error"].value("field", ""), c.field) << created.dump();
      EXPECT_EQ(ToolOutcome(mcp_created)["error"].value("field", ""), c.field) << mcp_created.dump();
      continue;
    }
    std::string mcp_id = ToolOutcome(mcp_created).value("sandbox_id", "");
    EXPECT_FALSE(mcp_id.empty()) << "MCP create_sandbox " << c.spec.dump() << ": " << mcp_created.dump();
    if (!mcp_id.empty()) {
      json mcp_exec = c.exec;
      mcp_exec["sandbox_id"] = mcp_id;
      mcp_exec["command"] = argv;
      EXPECT_EQ(Outcome(ToolOutcome(mcp.Call("exec", mcp_exec))), expected) << "MCP exec " << mcp_exec.dump();
      EXPECT_FALSE(mcp.Call("remove_sandbox", {{"sandbox_id", mcp_id}}).value("isError", true));
    }
    ASSERT_EQ(create_code, 201) << created.dump();
    std::string id = created.value("id", "");
    json exec = c.exec;
    exec["argv"] = argv;
    auto reply = client->Post(("/v1/sandboxes/" + id + "/exec").c_str(), exec.dump(), "application/json");
    ASSERT_TRUE(reply);
    json result;
    std::string out;
    for (const json& line : NdjsonLines(reply->body)) {
      if (line.value("type", "") == "stdout") out += line.value("data", "");
      if (line.value("type", "") == "result") result = line["result"];
    }
    if (result.is_object()) result["stdout"] = out;
    EXPECT_EQ(Outcome(result), expected) << "exec in a sandbox made with " << create.dump() << ": " << reply->body;
    auto removed = client->Delete(("/v1/sandboxes/" + id).c_str());
    EXPECT_TRUE(removed && removed->status / 100 == 2);
  }
}

}  // namespace
}  // namespace smolbox::testing
