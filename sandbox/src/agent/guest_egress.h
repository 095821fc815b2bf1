// The guest's half of egress in a microVM: the guest has no NIC, and its TCP connections and
// DNS queries reach the host's gateway only as streams on the egress port (egress_link.h).
//
// At a setup with egress, before the workload's namespaces, the agent (still the guest's root):
//   - makes the listeners the redirect brings connections to (confine/net.h);
//   - runs smolbox-egress-setup for the routes and the redirect (redirect/egress_redirect.h);
//   - forks the forwarder, a process outside the workload's namespaces and cgroup that relays
//     every accepted connection, tagged with its original destination, and every query, over
//     the port. The host judges each; the forwarder judges nothing.
//
// The workload never holds the port or the forwarder's sockets, and cannot reach the guest's
// netfilter rules: its user namespace does not own the guest's network namespace.
#pragma once

#include "smolbox/error.h"

namespace smolbox::agent {

Expected<void> StartGuestEgress();

}  // namespace smolbox::agent
