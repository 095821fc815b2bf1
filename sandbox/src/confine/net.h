// The sandbox's network namespace: loopback only, and no route anywhere else; or, with egress,
// a route for every destination into loopback, where a redirect hands each connection to the
// gateway's listeners (net/gateway.h), made here inside the namespace.
#pragma once

#include <cstdint>

#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::confine {

// Brings up `lo` in the current (new) network namespace.
Expected<void> BringUpLoopback();

// Makes Reno the congestion control of every TCP connection in the current network namespace
// that sets none of its own. With egress, each of the sandbox's connections runs over loopback to
// the gateway's listener. A host whose default paces its sends (BBR) then pays for pacing on a
// link that has no queue to protect: a download through the gateway ran at three quarters of a
// direct one with BBR, and at the direct rate with an algorithm that does not pace. Reno is built
// into every kernel and allowed in any namespace. It is speed, not protection: the error says why
// it could not be set, and the sandbox works without it.
Expected<void> UseUnpacedCongestionControl();

// Where the sandbox's resolv.conf points: the gateway's resolver, on the sandbox's loopback.
inline constexpr char kEgressResolver[] = "127.0.0.1";

// The gateway's listening sockets, made in the sandbox's network namespace. tcp6 is invalid
// where the kernel has no IPv6.
struct EgressSockets {
  UniqueFd tcp4, tcp6, dns;
  uint16_t tcp4_port = 0, tcp6_port = 0;
};

// The listeners: TCP on 127.0.0.1 and ::1 on ports of the kernel's choosing, and UDP on
// kEgressResolver:53. The routes and the redirect that bring connections to them are set up
// apart (redirect/egress_redirect.h): they need libnftables, which a static agent cannot link.
Expected<EgressSockets> MakeEgressSockets();

}  // namespace smolbox::confine
