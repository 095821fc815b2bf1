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
  EXPECT_EQ(decoded.error().where, "env");
}

}  // namespace
}  // namespace smolbox::persist
