// The egress field of the RunSpec has the same effect through every front end, as
// api/parity_test.cc checks the other fields: `smolbox run --allow-host`, POST /v1/run,
// POST /v1/sandboxes and an exec, the Python SDK's egress= and the MCP tools. The allowed name
// is fetched, another name gets no address and an address not allowed is refused, on each path.
// The servers run in the test internet's uplink with its resolver, as the battery's smolbox:api
// does, so that their gateways dial there and nowhere else.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/api_server.h"
#include "api/mcp_client.h"
#include "api/python_sdk_run.h"
#include "egress_probe.h"
#include "test_internet.h"

namespace smolbox::testing {
namespace {

using nlohmann::json;

constexpr const char* kSteps = "fetch api.allowed.test 80 api.allowed.test / resolve other.test / connect 192.0.2.20 80";
const std::string kExpected = "200 server=192.0.2.10 host=api.allowed.test\ngaierror -2\nECONNRESET\n";

class EgressParity : public TestInternetTest {
 protected:
  // A command that execs the rest in the uplink, with the test resolver as /etc/resolv.conf in
  // a mount namespace of its own.
  static std::vector<std::string> InUplinkWithItsResolver() {
    return {"/usr/bin/nsenter", "--net=" + internet().uplink_netns_path(), "--", "/usr/bin/unshare", "--mount",
            "--propagation", "private", "--", "/bin/sh", "-c", "mount --bind \"$0\" /etc/resolv.conf && exec \"$@\"",
            internet().resolv_conf_path()};
  }
};

// stdout of a run that exited 0, or what it ended with.
std::string Outcome(const json& result) {
  if (!result.is_object()) return "no result: " + result.dump();
  if (result.value("status", "") != "exited" || result.value("exit_code", -1) != 0) return result.dump();
  return result.value("stdout", "");
}

TEST_F(EgressParity, an_allowed_host_has_the_same_effect_through_the_cli_the_api_a_sandbox_the_sdk_and_mcp) {
  const std::vector<std::string> argv = {"/usr/bin/python3", "-c", kEgressProbe, kSteps};
  Invocation cli = RunSmolboxInClient({"run", "--json", "--backend", "ns", "--timeout", "60s", "--allow-host",
                                       "api.allowed.test", "--egress-netns", internet().uplink_netns_path(),
                                       "--dns-server", internet().dns_server(), "--", argv[0], argv[1], argv[2], argv[3]});
  EXPECT_EQ(Outcome(cli.result), kExpected) << "smolbox run: " << cli.err << internet().ServerLog();

  ApiServer server({}, "", {}, InUplinkWithItsResolver());
  ASSERT_FALSE(server.socket_path().empty()) << server.process().err();
  auto client = server.Client();
  const json egress = {{"allow_hosts", {"api.allowed.test"}}};
  const json run = {{"backend", "ns"}, {"argv", argv}, {"egress", egress}, {"limits", {{"timeout_ms", 60000}}}};
  auto [run_code, run_result] = Post(*client, "/v1/run", run.dump());
  EXPECT_EQ(run_code, 200);
  EXPECT_EQ(Outcome(run_result), kExpected) << "POST /v1/run";

  std::string sdk_error;
  EXPECT_EQ(Outcome(RunThroughPythonSdk(server.address(), run, &sdk_error)), kExpected) << "the Python SDK: " << sdk_error;

  auto [create_code, created] = Post(*client, "/v1/sandboxes", json{{"backend", "ns"}, {"egress", egress}}.dump());
  ASSERT_EQ(create_code, 201) << created.dump();
  std::string id = created.value("id", "");
  auto reply = client->Post(("/v1/sandboxes/" + id + "/exec").c_str(), json{{"argv", argv}}.dump(), "application/json");
  ASSERT_TRUE(reply);
  std::string out;
  for (const json& line : NdjsonLines(reply->body)) {
    if (line.value("type", "") == "stdout") out += line.value("data", "");
  }
  EXPECT_EQ(out, kExpected) << "an exec in a sandbox made with the policy: " << reply->body;
  auto removed = client->Delete(("/v1/sandboxes/" + id).c_str());
  EXPECT_TRUE(removed && removed->status / 100 == 2);

  McpClient mcp({"--allow-egress"}, {}, InUplinkWithItsResolver());
  json tool_run = mcp.Call("run_code", {{"command", argv}, {"egress", egress}});
  EXPECT_EQ(Outcome(tool_run.value("structuredContent", json())), kExpected) << "MCP run_code: " << tool_run.dump();
  json tool_box = mcp.Call("create_sandbox", {{"egress", egress}});
  std::string tool_id = tool_box.value("structuredContent", json::object()).value("sandbox_id", "");
  ASSERT_FALSE(tool_id.empty()) << tool_box.dump();
  json tool_exec = mcp.Call("exec", {{"sandbox_id", tool_id}, {"command", argv}});
  EXPECT_EQ(Outcome(tool_exec.value("structuredContent", json())), kExpected) << "MCP exec: " << tool_exec.dump();
}

}  // namespace
}  // namespace smolbox::testing
