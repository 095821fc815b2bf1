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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input = smolbox::fuzz::AsText(data, size);
  Receive(smolbox::fuzz::AsFrames(input));
  for (std::string_view rest = input; !rest.empty();) {
    size_t newline = rest.find('\n');
    if (auto message = smolbox::fuzz::AsMessage(rest.substr(0, newline))) {
      (void)smolbox::persist::DecodeExecOrder(*message);
      (void)smolbox::ResultFromJson(message->header);
    }
    rest.remove_prefix(newline == std::string_view::npos ? rest.size() : newline + 1);
  }
  return 0;
}
