// The gateway's side of the network: the namespace it dials from (--egress-netns, or smolbox's
// own), the host's own addresses there, which the floor refuses, and its upstream resolver.
#pragma once

#include <sys/socket.h>

#include <string>
#include <vector>

#include "smolbox/egress_policy.h"
#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::net {

class Uplink {
 public:
  // path empty: the namespace smolbox runs in. Otherwise a network namespace file such as
  // /run/netns/NAME or /proc/PID/ns/net; anything else is an error naming --egress-netns.
  static Expected<Uplink> Open(const std::string& path,
                               const std::optional<SocketAddress>& dns_server);

  // Moves the calling thread into the uplink's namespace: each gateway thread that makes
  // sockets calls it first. (setns of a network namespace is per thread.)
  Expected<void> EnterFromThisThread() const;
  const std::vector<IpAddress>& host_addresses() const { return host_addresses_; }
  const SocketAddress& dns_server() const { return dns_server_; }

 private:
  UniqueFd netns_;  // invalid: smolbox's own
  std::vector<IpAddress> host_addresses_;
  SocketAddress dns_server_;
};

// The socket address the kernel takes for to, and its size in size.
sockaddr_storage ToSockaddr(const SocketAddress& to, socklen_t& size);

// The first "nameserver" of a resolv.conf's text, or an error naming origin.
Expected<SocketAddress> FirstNameserver(const std::string& text, const std::string& origin);

}  // namespace smolbox::net
