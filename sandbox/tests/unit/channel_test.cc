#include "channel.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "exec_protocol.h"
#include "guest_protocol.h"
#include "json_bounds.h"
#include "test_support.h"
#include "unique_fd.h"

namespace smolbox::channel {
namespace {

using nlohmann::json;
using smolbox::testing::ErrorOf;
using smolbox::testing::PutU32;
using smolbox::testing::RawFrame;

std::string DeepHeader(int depth) {
  return R"({"type": "exit", "x": )" + std::string(depth, '[') + std::string(depth, ']') + "}";
}

Expected<std::optional<Message>> Decode(const std::string& bytes,
                                        const std::string& what = "agent message") {
  FrameReader reader(what);
  reader.Feed(bytes.data(), bytes.size());
  return reader.Next();
}

TEST(FrameReader, decodes_a_frame_it_encoded) {
  auto message = Decode(Encode({{{"type", "output"}, {"fd", 1}}, "bytes"}));
  ASSERT_TRUE(message && *message);
  EXPECT_EQ((*message)->Type(), "output");
  EXPECT_EQ((*message)->tail, "bytes");
}

TEST(FrameReader, refuses_a_header_nested_deeper_than_the_limit_naming_the_message) {
  EXPECT_EQ(ErrorOf(Decode(RawFrame(DeepHeader(100000)))),
            "agent message: nesting deeper than 32 levels");
}

TEST(FrameReader, accepts_a_header_exactly_at_the_depth_limit) {
  auto message = Decode(RawFrame(DeepHeader(kMaxJsonDepth - 1)));
  ASSERT_TRUE(message && *message) << ErrorOf(message);
  EXPECT_EQ((*message)->Type(), "exit");
}

TEST(FrameReader, refuses_a_header_over_16_MiB_naming_the_limit) {
  std::string header = R"({"type": "exit", "pad": ")" + std::string(kMaxHeaderBytes, ' ') + "\"}";
  EXPECT_EQ(ErrorOf(Decode(RawFrame(header))),
            fmt::format("agent message: {} bytes is over the 16 MiB limit", header.size()));
}

TEST(FrameReader, refuses_a_frame_over_80_MiB_from_its_length_alone) {
  std::string prefix;
  PutU32(prefix, kMaxFrameBytes + 1);
  EXPECT_EQ(ErrorOf(Decode(prefix)),
            "agent message: a 83886081 byte frame is over the 80 MiB limit");
}

TEST(FrameReader, takes_a_large_tail_behind_a_small_header) {
  auto message =
      Decode(RawFrame(R"({"type": "output", "fd": 1})", std::string(kMaxHeaderBytes + 1, 'x')));
  ASSERT_TRUE(message && *message) << ErrorOf(message);
  EXPECT_EQ((*message)->tail.size(), kMaxHeaderBytes + 1);
}

TEST(Message, has_no_type_when_its_type_is_not_a_string) {
  auto message = Decode(RawFrame(R"({"type": 1})"));
  ASSERT_TRUE(message && *message);
  EXPECT_EQ((*message)->Type(), "");
}

TEST(ReadMessage, refuses_a_deep_header_from_its_peer_naming_the_message) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  UniqueFd ours(fds[0]), peer(fds[1]);
  std::string frame = RawFrame(DeepHeader(5000));
  ASSERT_EQ(write(peer.get(), frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
  EXPECT_EQ(ErrorOf(ReadMessage(ours.get(), "guest message")),
            "guest message: nesting deeper than 32 levels");
}

TEST(WriteMessage, refuses_a_header_over_the_limit_before_sending_it) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  UniqueFd ours(fds[0]), peer(fds[1]);
  Message big{{{"type", "exec"}, {"argv", {std::string(kMaxHeaderBytes, 'a')}}}, ""};
  std::string error = ErrorOf(WriteMessage(ours.get(), big));
  EXPECT_TRUE(error.starts_with("channel write: a 167772")) << error;
  EXPECT_TRUE(error.ends_with(" byte header is over the 16 MiB limit")) << error;
}

TEST(DecodeExit, names_a_mistyped_field_of_a_hostile_report) {
  auto message = Decode(RawFrame(R"({"type": "exit", "status": 5})"));
  ASSERT_TRUE(message && *message);
  EXPECT_FALSE(DecodeExit(**message));
}

TEST(DecodeExit, refuses_a_float_where_an_integer_belongs_naming_the_field) {
  Message report = EncodeExit(ExecReport{});
  report.header["cpu_ms"] = 1e43;
  auto decoded = DecodeExit(report);
  ASSERT_FALSE(decoded);
  EXPECT_NE(decoded.error().what.find("cpu_ms must be an integer"), std::string::npos)
      << decoded.error().ToString();
}

TEST(DecodeGuestRestore, refuses_a_time_beyond_64_bits_naming_the_field) {
  GuestRestore sent;
  sent.seed = std::string(kRestoreSeedBytes, 's');
  Message restore = EncodeGuestRestore(sent);
  restore.header["realtime_nsec"] = json::parse("123456444444444444444444444444444444444789");
  auto decoded = DecodeGuestRestore(restore);
  ASSERT_FALSE(decoded);
  EXPECT_NE(decoded.error().what.find("realtime_nsec must be an integer"), std::string::npos)
      << decoded.error().ToString();
}

TEST(DecodeExec, refuses_a_uid_out_of_range_rather_than_wrapping_it) {
  ExecRequest request;
  request.argv = {"/bin/true"};
  Message exec = EncodeExec(request);
  exec.header["uid"] = -1;
  EXPECT_FALSE(DecodeExec(exec));
}

}  // namespace
}  // namespace smolbox::channel
