// The control socket's protocol against a hostile or broken peer: whatever a keeper or a client
// sends, the reader stays bounded and answers with an error, never a throw.
#include "control_protocol.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "test_support.h"
#include "unique_fd.h"

namespace smolbox::persist {
namespace {

using smolbox::testing::RawFrame;

// What ReceiveResult makes of these frames, sent by a keeper that then hangs up.
std::string ReceiveAfter(const std::string& frames) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return "socketpair failed";
  UniqueFd ours(fds[0]), keeper(fds[1]);
  if (write(keeper.get(), frames.data(), frames.size()) != static_cast<ssize_t>(frames.size())) {
    return "write failed";
  }
  keeper.Reset();
  auto result = ReceiveResult(ours.get());
  return result ? "<a result>" : result.error().ToString();
}

TEST(ReceiveResult, refuses_a_result_nested_deeper_than_the_limit_naming_the_message) {
  std::string deep = R"({"type": "result", "warnings": )" + std::string(100000, '[') +
                     std::string(100000, ']') + "}";
  EXPECT_EQ(ReceiveAfter(RawFrame(deep)), "keeper message: nesting deeper than 32 levels");
}

TEST(ReceiveResult, refuses_output_whose_stream_is_not_a_number_without_throwing) {
  EXPECT_EQ(ReceiveAfter(RawFrame(R"({"type": "output", "fd": "1"})")),
            "sandbox: output for an unknown stream");
}

TEST(ReceiveResult, names_a_message_whose_type_is_not_a_string) {
  EXPECT_EQ(ReceiveAfter(RawFrame(R"({"type": ["result"]})")),
            "sandbox: unexpected message \"\" from its keeper");
}

TEST(DecodeExecOrder, names_the_field_of_a_mistyped_order) {
  channel::Message order{{{"type", "exec"}, {"argv", {"/bin/true"}}, {"env", {{"A", 1}}}}, ""};
  auto decoded = DecodeExecOrder(order);
  ASSERT_FALSE(decoded);
  EXPECT_EQ(decoded.error().ToString(), R"(exec order: env["A"] must be a string)");
}

std::string OrderErrorAfter(const char* field, const nlohmann::json& value) {
  ExecOrder sent;
  sent.argv = {"/bin/true"};
  sent.workdir = "/tmp";
  sent.timeout_ms = 5000;
  channel::Message order = EncodeExecOrder(sent);
  if (value.is_discarded()) {
    order.header.erase(field);
  } else {
    order.header[field] = value;
  }
  auto decoded = DecodeExecOrder(order);
  return decoded ? "<no error>" : decoded.error().ToString();
}

TEST(DecodeExecOrder, names_the_order_and_the_field_in_its_own_words) {
  const nlohmann::json removed = nlohmann::json::value_t::discarded;
  struct Case {
    const char* field;
    nlohmann::json value;
    const char* error;
  };
  const Case cases[] = {
      {"stdin", removed, "exec order: field stdin is missing"},
      {"argv", "ls", "exec order: argv must be a list"},
      {"timeout_ms", 5000.5, "exec order: timeout_ms must be an integer"},
      {"timeout_ms", 1e300, "exec order: timeout_ms must be an integer"},
      {"timeout_ms", uint64_t{1} << 63, "exec order: timeout_ms is out of range"},
      {"workdir", removed, "<no error>"},
      {"timeout_ms", removed, "<no error>"},
  };
  for (const Case& c : cases) {
    std::string error = OrderErrorAfter(c.field, c.value);
    EXPECT_EQ(error, c.error) << c.field;
    EXPECT_EQ(error.find("json.exception"), std::string::npos) << error;
  }
}

TEST(DecodeExecOrder, round_trips_every_field) {
  ExecOrder sent;
  sent.argv = {"/bin/sh", "-c", "ls"};
  sent.env = {{"A", "1"}};
  sent.workdir = "/tmp";
  sent.timeout_ms = 5000;
  sent.sends_stdin = true;
  auto back = DecodeExecOrder(EncodeExecOrder(sent));
  ASSERT_TRUE(back) << back.error().ToString();
  EXPECT_EQ(EncodeExecOrder(*back).header, EncodeExecOrder(sent).header);
  EXPECT_EQ(back->timeout_ms, 5000);
  EXPECT_EQ(back->workdir, "/tmp");
  EXPECT_TRUE(back->sends_stdin);
  EXPECT_FALSE(back->streams_output);
  // The wire format, which fuzz/corpus/control holds too.
  EXPECT_EQ(EncodeExecOrder(sent).header.dump(),
            R"({"argv":["/bin/sh","-c","ls"],"env":{"A":"1"},"stdin":true,)"
            R"("stream_output":false,"timeout_ms":5000,"type":"exec","workdir":"/tmp"})");
  auto unset = DecodeExecOrder(EncodeExecOrder(ExecOrder{}));
  ASSERT_TRUE(unset) << unset.error().ToString();
  EXPECT_FALSE(unset->workdir || unset->timeout_ms);
}

}  // namespace
}  // namespace smolbox::persist
