#include "uplink.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <linux/nsfs.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace smolbox::net {
namespace {

constexpr char kNetnsFlag[] = "--egress-netns";

Expected<UniqueFd> OpenNetns(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    return std::unexpected(
        Error{kNetnsFlag, fmt::format("cannot open {}: {}", path, std::strerror(errno)), 0});
  }
  // NS_GET_NSTYPE answers only for a namespace file, and says which kind it is.
  if (ioctl(fd.get(), NS_GET_NSTYPE) != CLONE_NEWNET) {
    return std::unexpected(
        Error{kNetnsFlag, fmt::format("{} is not a network namespace", path), 0});
  }
  return fd;
}

std::vector<IpAddress> OwnAddresses() {
  std::vector<IpAddress> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr) continue;
    if (i->ifa_addr->sa_family == AF_INET) {
      out.push_back(
          IpAddress::V4(ntohl(reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr)));
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      std::array<uint8_t, 16> bytes{};
      std::memcpy(bytes.data(), &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, 16);
      out.push_back(IpAddress::V6(bytes));
    }
  }
  freeifaddrs(list);
  return out;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

sockaddr_storage ToSockaddr(const SocketAddress& to, socklen_t& size) {
  sockaddr_storage address{};
  if (to.address.v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&address);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(to.port);
    std::memcpy(&a->sin6_addr, to.address.bytes.data(), 16);
    size = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&address);
    a->sin_family = AF_INET;
    a->sin_port = htons(to.port);
    std::memcpy(&a->sin_addr, to.address.bytes.data(), 4);
    size = sizeof *a;
  }
  return address;
}

Expected<SocketAddress> FirstNameserver(const std::string& text, const std::string& origin) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string key, value;
    if (!(words >> key >> value) || key != "nameserver") continue;
    // resolv.conf writes IPv6 servers bare, without brackets or a port.
    auto address = ParseIpAddress(value, origin);
    if (address) return SocketAddress{*address, 53};
    return std::unexpected(address.error());
  }
  return std::unexpected(Error{origin, "names no nameserver: give --dns-server", 0});
}

Expected<Uplink> Uplink::Open(const std::string& path,
                              const std::optional<SocketAddress>& dns_server) {
  Uplink uplink;
  if (!path.empty()) {
    SMOLBOX_ASSIGN_OR_RETURN(uplink.netns_, OpenNetns(path));
  }
  if (dns_server) {
    uplink.dns_server_ = *dns_server;
  } else {
    SMOLBOX_ASSIGN_OR_RETURN(uplink.dns_server_,
                             FirstNameserver(ReadText("/etc/resolv.conf"), "/etc/resolv.conf"));
  }
  // The addresses are the namespace's, so they are read from a thread inside it.
  Expected<void> entered;
  std::thread reader([&] {
    entered = uplink.EnterFromThisThread();
    if (entered) uplink.host_addresses_ = OwnAddresses();
  });
  reader.join();
  SMOLBOX_TRY(entered);
  return uplink;
}

Expected<void> Uplink::EnterFromThisThread() const {
  if (!netns_.valid()) return {};
  if (setns(netns_.get(), CLONE_NEWNET) != 0) {
    return std::unexpected(
        Error{kNetnsFlag, fmt::format("cannot enter it: {}", std::strerror(errno)), 0});
  }
  return {};
}

}  // namespace smolbox::net
