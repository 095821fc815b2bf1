#include "net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace smolbox::confine {
namespace {

Expected<UniqueFd> Listen(int family, int type, const char* address, uint16_t port,
                          uint16_t& bound) {
  UniqueFd fd(socket(family, type | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return std::unexpected(Error::Sys("socket for the egress gateway"));
  sockaddr_storage storage{};
  socklen_t size;
  if (family == AF_INET6) {
    int one = 1;
    setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    auto* a = reinterpret_cast<sockaddr_in6*>(&storage);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    inet_pton(AF_INET6, address, &a->sin6_addr);
    size = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&storage);
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    inet_pton(AF_INET, address, &a->sin_addr);
    size = sizeof *a;
  }
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&storage), size) != 0) {
    return std::unexpected(
        Error::Sys(std::string("bind the egress gateway's socket on ") + address));
  }
  if (type == SOCK_STREAM && listen(fd.get(), 128) != 0)
    return std::unexpected(Error::Sys("listen"));
  size = sizeof storage;
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&storage), &size);
  bound = ntohs(family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port
                                   : reinterpret_cast<sockaddr_in*>(&storage)->sin_port);
  return fd;
}

}  // namespace

Expected<void> BringUpLoopback() {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::unexpected(Error::Sys("socket AF_INET for lo"));
  ifreq request{};
  std::strncpy(request.ifr_name, "lo", IFNAMSIZ - 1);
  request.ifr_flags = IFF_UP | IFF_RUNNING;
  int rc = ioctl(fd, SIOCSIFFLAGS, &request);
  int err = errno;
  close(fd);
  if (rc != 0) return std::unexpected(Error::Sys("ioctl SIOCSIFFLAGS lo up", err));
  return {};
}

Expected<void> UseUnpacedCongestionControl() {
  // /proc/sys/net shows the namespace of whoever opens it; the setup root owns this one.
  static constexpr char kPath[] = "/proc/sys/net/ipv4/tcp_congestion_control";
  static constexpr char kReno[] = "reno\n";
  UniqueFd fd(open(kPath, O_WRONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return std::unexpected(Error::Sys(std::string("open ") + kPath));
  if (write(fd.get(), kReno, sizeof kReno - 1) != static_cast<ssize_t>(sizeof kReno - 1))
    return std::unexpected(Error::Sys(std::string("write reno to ") + kPath));
  return {};
}

Expected<EgressSockets> MakeEgressSockets() {
  EgressSockets sockets;
  uint16_t dns_port = 0;
  SMOLBOX_ASSIGN_OR_RETURN(sockets.tcp4,
                           Listen(AF_INET, SOCK_STREAM, "127.0.0.1", 0, sockets.tcp4_port));
  SMOLBOX_ASSIGN_OR_RETURN(sockets.dns, Listen(AF_INET, SOCK_DGRAM, kEgressResolver, 53, dns_port));
  UniqueFd probe(socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!probe.valid() && errno == EAFNOSUPPORT) return sockets;  // a kernel without IPv6
  if (!probe.valid()) return std::unexpected(Error::Sys("socket AF_INET6"));
  SMOLBOX_ASSIGN_OR_RETURN(sockets.tcp6,
                           Listen(AF_INET6, SOCK_STREAM, "::1", 0, sockets.tcp6_port));
  return sockets;
}

}  // namespace smolbox::confine
