// A sandbox's network namespace, or a VM guest's, when it has egress: default routes into
// loopback, so that
// a connect() to any address gets as far as netfilter's output hook, and nftables rules there
// that redirect every TCP connection that does not stay on loopback to the gateway's listener
// and reject every other packet that would leave loopback (UDP but the resolver, ICMP).
//
// They are plumbing, not the protection: the namespace has no uplink, so a workload that
// flushed them would only lose its way to the gateway. Through libnftables: in the ns
// backend's setup, while it is root of the sandbox's user namespace, which owns the network
// namespace; in a guest, by smolbox-egress-setup (egress_setup_main.cc), which the agent runs
// before the workload's namespaces.
#pragma once

#include <cstdint>
#include <string>

#include "smolbox/error.h"

namespace smolbox::redirect {

// Both default routes through lo, by rtnetlink (libmnl). IPv4's names 127.0.0.1 as its source:
// without one, a connection leaves from 0.0.0.0, and the redirected listener's data never comes
// back to it. ipv6: whether to add IPv6's too.
Expected<void> AddDefaultRoutesThroughLoopback(bool ipv6);
// The ruleset's text, for the redirect to these ports (tcp6_port 0: no IPv6).
std::string EgressRuleset(uint16_t tcp4_port, uint16_t tcp6_port);
Expected<void> InstallEgressRedirect(uint16_t tcp4_port, uint16_t tcp6_port);

}  // namespace smolbox::redirect
