// The QMP client against a QEMU that a guest may have taken over: whatever comes back on the
// monitor, the host stays bounded and answers with an error naming the command.
#include "vm/qmp.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

namespace smolbox::vm {
namespace {

// The handshake's error when QEMU's end of the monitor says text and nothing more. The writer
// is a thread: a line larger than the socket's buffer blocks until the host reads it.
std::string HandshakeError(const std::string& text) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return "socketpair failed";
  UniqueFd qemu(fds[1]);
  std::thread writer([fd = qemu.get(), &text] {
    for (size_t done = 0; done < text.size();) {
      ssize_t n = send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return;  // the host hung up, as it does after an error
      done += static_cast<size_t>(n);
    }
  });
  std::string error;
  {
    Qmp qmp{UniqueFd(fds[0])};
    auto ok = qmp.Handshake(5000);
    error = ok ? "<handshake>" : ok.error().ToString();
  }
  writer.join();
  return error;
}

TEST(Qmp, refuses_a_reply_nested_deeper_than_the_limit_naming_the_command) {
  std::string deep = R"({"QMP": )" + std::string(100000, '[') + std::string(100000, ']') + "}\n";
  EXPECT_EQ(HandshakeError(deep), "qmp: greeting: nesting deeper than 32 levels");
}

TEST(Qmp, refuses_a_line_over_1_MiB_without_waiting_for_its_end) {
  EXPECT_EQ(HandshakeError(R"({"QMP": ")" + std::string(2 << 20, 'x')),
            "qmp: greeting: QEMU sent a line over the 1 MiB limit");
}

TEST(Qmp, reads_an_error_whose_desc_is_not_a_string_without_throwing) {
  EXPECT_EQ(HandshakeError("{\"QMP\": {}}\n{\"error\": {\"desc\": 1}}\n"),
            "qmp: qmp_capabilities: {\"desc\":1}");
}

}  // namespace
}  // namespace smolbox::vm
