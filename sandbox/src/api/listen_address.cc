#include "listen_address.h"

#include <arpa/inet.h>
#include <sys/un.h>

#include <charconv>

#include <fmt/format.h>

namespace smolbox::api {
namespace {

Error Bad(const std::string& text, const std::string& reason) {
  return Error::Field("--listen", fmt::format("{:?}: {}", text, reason));
}

}  // namespace

std::string ListenAddress::ToString() const {
  if (kind == Kind::kUnix) return "unix:" + path;
  if (host.find(':') != std::string::npos) return fmt::format("tcp:[{}]:{}", host, port);
  return fmt::format("tcp:{}:{}", host, port);
}

Expected<ListenAddress> ParseListenAddress(const std::string& text) {
  ListenAddress address;
  if (text.starts_with("unix:")) {
    address.path = text.substr(5);
    if (address.path.empty() || address.path[0] != '/') return std::unexpected(Bad(text, "a unix socket path must be absolute"));
    if (address.path.size() >= sizeof(sockaddr_un::sun_path)) {
      return std::unexpected(Bad(text, fmt::format("a unix socket path is at most {} bytes", sizeof(sockaddr_un::sun_path) - 1)));
    }
    return address;
  }
  if (!text.starts_with("tcp:")) return std::unexpected(Bad(text, "must start with unix: or tcp:"));
  address.kind = ListenAddress::Kind::kTcp;
  std::string rest = text.substr(4);
  size_t colon = rest.rfind(':');
  if (colon == std::string::npos) return std::unexpected(Bad(text, "has no port: tcp:HOST:PORT"));
  std::string host = rest.substr(0, colon);
  std::string port = rest.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int value = -1;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value < 0 || value > 65535) {
    return std::unexpected(Bad(text, "the port must be a number from 0 to 65535"));
  }
  unsigned char buffer[16];
  bool literal = inet_pton(AF_INET, host.c_str(), buffer) == 1 || inet_pton(AF_INET6, host.c_str(), buffer) == 1;
  if (!literal && host != "localhost") {
    return std::unexpected(Bad(text, "the host must be an IP address or localhost (names are not resolved)"));
  }
  address.host = host;
  address.port = value;
  return address;
}

bool IsLoopback(const ListenAddress& address) {
  if (address.kind == ListenAddress::Kind::kUnix) return true;
  if (address.host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, address.host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return inet_pton(AF_INET6, address.host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

}  // namespace smolbox::api
