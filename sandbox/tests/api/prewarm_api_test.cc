// "prewarm" over the API: a sandbox created by POST /v1/sandboxes with it forks its Python execs
// from the guest's zygote, as `smolbox create --prewarm python` does (PrewarmPython, in the vm
// suite). Under TCG. A forked exec is told apart by gc.get_freeze_count(), which only the
// zygote's frozen heap makes non-zero. Where the field is refused: Api.bad_requests_*.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "api_server.h"

namespace smolbox::testing {
namespace {

using nlohmann::json;

constexpr const char* kFreezeCount = "import gc; print(gc.get_freeze_count() > 0)";

// The stdout of one exec, or "" when it did not exit 0.
std::string ExecStdout(httplib::Client& client, const std::string& id, const std::vector<std::string>& argv) {
  json request = {{"argv", argv}, {"timeout_ms", 60000}};
  auto reply = client.Post(("/v1/sandboxes/" + id + "/exec").c_str(), request.dump(), "application/json");
  if (!reply || reply->status != 200) return "";
  std::string out;
  for (const json& line : NdjsonLines(reply->body)) {
    if (line.value("type", "") == "stdout") out += line.value("data", "");
    if (line.value("type", "") == "result" && line["result"].value("exit_code", -1) != 0) return "";
  }
  return out;
}

TEST(ApiPrewarm, a_sandbox_created_with_prewarm_forks_its_python_execs_and_its_removal_ends_them) {
  ApiServer server;
  ASSERT_FALSE(server.socket_path().empty()) << server.process().err();
  auto client = server.Client();
  auto [code, created] =
      Post(*client, "/v1/sandboxes", R"({"backend": "vm", "accel": "tcg", "prewarm": "python"})");
  ASSERT_EQ(code, 201) << created.dump();
  std::string id = created.value("id", "");

  // The zygote is ready a few seconds after the create; until then execs run as plain ones.
  bool forked = false;
  for (int attempt = 0; attempt < 30 && !forked; ++attempt) {
    forked = ExecStdout(*client, id, {"python3", "-c", kFreezeCount}) == "True\n";
  }
  EXPECT_TRUE(forked) << "no exec came from the zygote";
  // An option that changes how Python starts is not the zygote's to serve: a plain exec.
  EXPECT_EQ(ExecStdout(*client, id, {"python3", "-I", "-c", kFreezeCount}), "False\n");

  auto removed = client->Delete(("/v1/sandboxes/" + id).c_str());
  ASSERT_TRUE(removed);
  EXPECT_EQ(removed->status, 200) << removed->body;
  auto names = ApiSandboxesOnHost();
  EXPECT_EQ(std::find(names.begin(), names.end(), id), names.end()) << "the sandbox outlived its removal";
}

}  // namespace
}  // namespace smolbox::testing
