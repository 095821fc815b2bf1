// The persistent sandboxes' control socket: what a keeper sends `smolbox exec` (output, then
// the result), and the exec order a keeper decodes from a client. One message per line.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control_protocol.h"
#include "fuzz_input.h"

namespace {

// ReceiveResult reading the lines as a keeper's frames, the keeper hanging up after them.
void Receive(const std::string& frames) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return;
  // Frames that do not fit in the socket's buffer are skipped rather than waited on: the reader
  // is this thread too.
  fcntl(fds[1], F_SETFL, O_NONBLOCK);
  bool written = write(fds[1], frames.data(), frames.size()) == static_cast<ssize_t>(frames.size());
  close(fds[1]);
  if (written) (void)smolbox::persist::ReceiveResult(fds[0]);
  close(fds[0]);
}

// A decoded order or result must encode and decode to the same encoding.
void CheckRoundTrips(const smolbox::channel::Message& message) {
  using smolbox::fuzz::Require;
  if (auto order = smolbox::persist::DecodeExecOrder(message)) {
    auto again = smolbox::persist::DecodeExecOrder(smolbox::persist::EncodeExecOrder(*order));
    Require(again.has_value(), "an encoded order decodes");
    Require(smolbox::persist::EncodeExecOrder(*again).header ==
                smolbox::persist::EncodeExecOrder(*order).header,
            "an order survives a round trip");
  }
  if (auto result = smolbox::ResultFromJson(message.header)) {
    auto again = smolbox::ResultFromJson(smolbox::ToJson(*result));
    Require(again.has_value(), "an encoded result decodes");
    Require(smolbox::ToJson(*again) == smolbox::ToJson(*result), "a result survives a round trip");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input = smolbox::fuzz::AsText(data, size);
  Receive(smolbox::fuzz::AsFrames(input));
  for (std::string_view rest = input; !rest.empty();) {
    size_t newline = rest.find('\n');
    if (auto message = smolbox::fuzz::AsMessage(rest.substr(0, newline))) CheckRoundTrips(*message);
    rest.remove_prefix(newline == std::string_view::npos ? rest.size() : newline + 1);
  }
  return 0;
}
