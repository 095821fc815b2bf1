// `smolbox mcp` driven as an agent's client drives it: JSON-RPC lines through a pipe, on the ns
// backend. Every tool, its limits, its errors, and the session's end.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "api_server.h"
#include "mcp_client.h"
#include "smolbox_runner.h"
#include "test_support.h"

namespace smolbox::testing {
namespace {

using nlohmann::json;

std::string Text(const json& result) {
  if (!result.contains("content") || result["content"].empty()) return "";
  return result["content"][0].value("text", "");
}

TEST(Mcp, initialize_negotiates_the_version_and_lists_the_six_tools_with_their_schemas) {
  McpClient mcp;
  json init = mcp.Request("initialize", {{"protocolVersion", "2025-03-26"},
                                         {"capabilities", json::object()},
                                         {"clientInfo", {{"name", "test"}, {"version", "1"}}}});
  ASSERT_TRUE(init.contains("result")) << init.dump();
  EXPECT_EQ(init["result"]["protocolVersion"], "2025-03-26");
  EXPECT_EQ(init["result"]["serverInfo"]["name"], "smolbox");
  EXPECT_TRUE(init["result"]["capabilities"].contains("tools"));
  json future = mcp.Request("initialize", {{"protocolVersion", "2099-01-01"}});
  EXPECT_EQ(future["result"]["protocolVersion"], "2025-06-18") << "an unknown version gets the newest known";
  // A notification gets no reply: the next reply is the ping's.
  EXPECT_EQ(mcp.Request("ping", json::object()).value("result", json()), json::object());

  json tools = mcp.Request("tools/list", json::object())["result"]["tools"];
  std::vector<std::string> names;
  for (const json& tool : tools) {
    names.push_back(tool["name"]);
    EXPECT_EQ(tool["inputSchema"]["type"], "object") << tool.dump();
    EXPECT_FALSE(tool.value("description", "").empty());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"run_code", "create_sandbox", "exec", "write_file", "read_file",
                                              "remove_sandbox"}));
}

TEST(Mcp, run_code_runs_in_a_sandbox_with_strict_defaults_and_its_limits_hold) {
  McpClient mcp;
  json hello = mcp.Call("run_code", {{"code", "import sys; print(input()[::-1]); sys.exit(2)"}, {"stdin", "abc\n"}});
  EXPECT_FALSE(hello.value("isError", true));
  EXPECT_EQ(hello["structuredContent"]["stdout"], "cba\n");
  EXPECT_EQ(hello["structuredContent"]["exit_code"], 2);
  EXPECT_NE(Text(hello).find("exit code 2"), std::string::npos) << Text(hello);

  // No network: only loopback exists; and the default wall limit is 30 s.
  json net = mcp.Call("run_code", {{"code", "print([l.split(':')[0].strip() for l in open('/proc/net/dev')][2:])"}});
  EXPECT_EQ(net["structuredContent"]["stdout"], "['lo']\n");
  EXPECT_EQ(net["structuredContent"]["backend"], "ns");
  json shell = mcp.Call("run_code", {{"language", "shell"}, {"code", "echo $((6 * 7))"}});
  EXPECT_EQ(shell["structuredContent"]["stdout"], "42\n");
  json js = mcp.Call("run_code", {{"language", "javascript"}, {"code", "console.log(6 * 7)"}});
  EXPECT_EQ(js["structuredContent"]["stdout"], "42\n");

  json slow = mcp.Call("run_code", {{"code", "while True: pass"}, {"limits", {{"timeout_ms", 1000}}}});
  EXPECT_TRUE(slow.value("isError", false));
  EXPECT_EQ(slow["structuredContent"]["status"], "timeout");
  EXPECT_NE(Text(slow).find("limits.timeout_ms"), std::string::npos) << Text(slow);
  json greedy = mcp.Call("run_code", {{"code", "held = [bytearray(1 << 20) for _ in range(512)]"},
                                      {"limits", {{"memory_mib", 64}}}});
  EXPECT_EQ(greedy["structuredContent"]["status"], "memory_limit");
  EXPECT_NE(Text(greedy).find("limits.memory_mib"), std::string::npos) << Text(greedy);
}

TEST(Mcp, a_sandbox_serves_execs_and_files_until_removed) {
  McpClient mcp;
  json created = mcp.Call("create_sandbox", {{"limits", {{"memory_mib", 128}}}, {"env", {{"KEPT", "yes"}}}});
  ASSERT_FALSE(created.value("isError", true)) << created.dump();
  std::string id = created["structuredContent"]["sandbox_id"];
  EXPECT_FALSE(mcp.Call("write_file", {{"sandbox_id", id}, {"path", "/work/in.csv"}, {"content", "a,b\n1,2\n"}})
                   .value("isError", true));
  json ran = mcp.Call("exec", {{"sandbox_id", id},
                               {"code", "import csv, os\nrows = list(csv.DictReader(open('/work/in.csv')))\n"
                                        "open('/work/out.txt', 'w').write(rows[0]['b'] + os.environ['KEPT'])"}});
  EXPECT_FALSE(ran.value("isError", true)) << ran.dump();
  json read = mcp.Call("read_file", {{"sandbox_id", id}, {"path", "/work/out.txt"}});
  EXPECT_EQ(Text(read), "2yes");
  json command = mcp.Call("exec", {{"sandbox_id", id}, {"command", {"/bin/cat", "/work/out.txt"}}});
  EXPECT_EQ(command["structuredContent"]["stdout"], "2yes");
  json timed = mcp.Call("exec", {{"sandbox_id", id}, {"code", "while True: pass"}, {"timeout_ms", 1000}});
  EXPECT_EQ(timed["structuredContent"]["status"], "timeout");

  EXPECT_FALSE(mcp.Call("remove_sandbox", {{"sandbox_id", id}}).value("isError", true));
  auto names = ApiSandboxesOnHost();
  EXPECT_EQ(std::find(names.begin(), names.end(), id), names.end()) << id << " outlived its removal";
  json gone = mcp.Call("exec", {{"sandbox_id", id}, {"command", {"/bin/true"}}});
  EXPECT_TRUE(gone.value("isError", false));
  EXPECT_EQ(gone["structuredContent"]["error"]["field"], "sandbox_id");
}

TEST(Mcp, bad_calls_are_tool_errors_naming_the_field_and_the_server_goes_on) {
  McpClient mcp;
  struct Case {
    const char* tool;
    json arguments;
    const char* field;
  };
  Case cases[] = {
      {"run_code", json::object(), "code"},
      {"run_code", {{"code", 1}}, "code"},
      {"run_code", {{"code", "1"}, {"language", "cobol"}}, "language"},
      {"run_code", {{"code", "1"}, {"limits", {{"memory_mib", "lots"}}}}, "limits.memory_mib"},
      {"run_code", {{"code", "1"}, {"limits", {{"pids", 0}}}}, "limits.pids"},
      {"run_code", {{"code", "1"}, {"volumes", json::array()}}, "volumes"},
      {"run_code", {{"code", "1"}, {"command", {"/bin/true"}}}, "command"},
      {"run_code", {{"command", {"/bin/true", 1}}}, "command[1]"},
      // Host paths are refused as over the API, and the session's backend is the operator's.
      {"run_code", {{"code", "1"}, {"stdin_file", "/etc/shadow"}}, "stdin_file"},
      {"run_code", {{"code", "1"}, {"image", "/"}}, "image"},
      {"run_code", {{"code", "1"}, {"mounts", {{{"source", "x"}, {"target", "/x"}}}}}, "mounts"},
      {"run_code", {{"code", "1"}, {"backend", "vm"}}, "backend"},
      // No network unless the operator started the session with --allow-egress.
      {"run_code", {{"code", "1"}, {"egress", {{"allow_hosts", {"api.allowed.test"}}}}}, "egress"},
      {"create_sandbox", {{"egress", {{"net", true}}}}, "egress"},
      {"create_sandbox", {{"entrypoint", {"/bin/sh"}}}, "entrypoint"},
      // workdir is an exec's argument: the unknown sandbox is what is wrong.
      {"exec", {{"sandbox_id", "x"}, {"workdir", 7}}, "sandbox_id"},
      {"exec", {{"sandbox_id", "api-0000000000000000"}, {"command", {"/bin/true"}}}, "sandbox_id"},
      {"read_file", {{"sandbox_id", "x"}}, "sandbox_id"},
      {"create_sandbox", {{"limits", {{"timeout_ms", -1}}}}, "limits.timeout_ms"},
  };
  for (const Case& c : cases) {
    json result = mcp.Call(c.tool, c.arguments);
    EXPECT_TRUE(result.value("isError", false)) << c.tool << " " << c.arguments.dump();
    EXPECT_EQ(result["structuredContent"]["error"]["field"], c.field) << result.dump();
  }
  // Protocol errors are JSON-RPC errors, and the server still answers after each.
  EXPECT_EQ(mcp.Send("not json")["error"]["code"], -32700);
  EXPECT_EQ(mcp.Send(R"({"jsonrpc": "1.0", "id": 1, "method": "ping"})")["error"]["code"], -32600);
  EXPECT_EQ(mcp.Request("no/such/method", json::object())["error"]["code"], -32601);
  EXPECT_EQ(mcp.Request("tools/call", {{"name", "no_such_tool"}})["error"]["code"], -32602);
  EXPECT_EQ(mcp.Request("ping", json::object())["result"], json::object());
}

TEST(Mcp, the_end_of_the_session_removes_its_sandboxes) {
  std::string id;
  {
    McpClient mcp;
    json created = mcp.Call("create_sandbox", json::object());
    id = created["structuredContent"].value("sandbox_id", "");
    ASSERT_FALSE(id.empty()) << created.dump();
    auto names = ApiSandboxesOnHost();
    EXPECT_NE(std::find(names.begin(), names.end(), id), names.end());
    mcp.process().CloseStdin();
    EXPECT_EQ(mcp.process().Wait(std::chrono::seconds(60)), 0);
  }
  auto names = ApiSandboxesOnHost();
  EXPECT_EQ(std::find(names.begin(), names.end(), id), names.end()) << id << " outlived its session";
}

}  // namespace
}  // namespace smolbox::testing
