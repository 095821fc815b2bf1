// Raw bytes on a VM's egress port, as a hostile guest may send them, into the host's end of the
// link (egress_link.h). Whatever the frames say, the mux ends cleanly or with an error, holds no
// more than a window per stream, and opens streams only through its hook.
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "egress_link.h"
#include "fuzz_input.h"

using smolbox::UniqueFd;
using smolbox::egress_link::LinkMux;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int link[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, link) != 0) return 0;
  UniqueFd host(link[0]), guest(link[1]);
  // Inputs are a few KiB: the socket holds them all, and the close is the end of the frames.
  size_t written = 0;
  while (written < size) {
    ssize_t n = write(guest.get(), data + written, size - written);
    if (n <= 0) return 0;
    written += static_cast<size_t>(n);
  }
  shutdown(guest.get(), SHUT_WR);
  std::vector<UniqueFd> servers;  // the gateway's ends, never read: the windows must hold
  size_t opened = 0;
  LinkMux mux(host.get(),
              {.opened =
                   [&](uint32_t, const smolbox::SocketAddress&) {
                     int pair[2];
                     if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0)
                       return UniqueFd();
                     servers.emplace_back(pair[1]);
                     ++opened;
                     return UniqueFd(pair[0]);
                   },
               .query = [](uint32_t, std::string) {},
               .reply = nullptr});
  UniqueFd stop(eventfd(0, EFD_CLOEXEC));
  (void)mux.Run(stop.get());
  smolbox::fuzz::Require(mux.open_streams() <= opened, "streams come only from the hook");
  return 0;
}
