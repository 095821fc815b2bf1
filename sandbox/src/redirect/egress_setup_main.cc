// smolbox-egress-setup: the routes and the redirect of egress_redirect.h, in the network
// namespace it runs in. The agent in a VM guest runs it, as the guest's root, before the
// workload starts: the agent is static, and libnftables is not. scripts/build-guest puts it in
// the initramfs with the libraries it needs.
//
//   smolbox-egress-setup TCP4_PORT TCP6_PORT   # TCP6_PORT 0: no IPv6
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "egress_redirect.h"

namespace {

bool ParsePort(std::string_view text, uint16_t& port) {
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), port);
  return error == std::errc() && end == text.data() + text.size();
}

int Fail(const smolbox::Error& error) {
  std::fprintf(stderr, "%s\n", error.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  uint16_t tcp4 = 0, tcp6 = 0;
  if (argc != 3 || !ParsePort(argv[1], tcp4) || tcp4 == 0 || !ParsePort(argv[2], tcp6)) {
    std::fprintf(stderr, "usage: smolbox-egress-setup TCP4_PORT TCP6_PORT (0: no IPv6)\n");
    return 2;
  }
  if (auto routed = smolbox::redirect::AddDefaultRoutesThroughLoopback(tcp6 != 0); !routed)
    return Fail(routed.error());
  if (auto redirected = smolbox::redirect::InstallEgressRedirect(tcp4, tcp6); !redirected)
    return Fail(redirected.error());
  return 0;
}
