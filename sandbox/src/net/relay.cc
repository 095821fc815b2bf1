// One TCP connection through the gateway: where the workload meant to go, the verdict, the
// name its first bytes carry, the dial from the uplink, and the bytes each way.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <linux/netfilter_ipv4.h>
#include <linux/netfilter_ipv6/ip6_tables.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <optional>

#include "first_bytes.h"
#include "gateway_state.h"

namespace smolbox::net {
namespace {

constexpr int kFirstBytesTimeoutMs = 10000;
constexpr int kDialTimeoutMs = 10000;
constexpr size_t kRelayBuffer = 256 * 1024;

// Where the redirect found the connection going: conntrack's original destination.
std::optional<SocketAddress> OriginalDestination(int client, bool v6) {
  if (!v6) {
    sockaddr_in original{};
    socklen_t size = sizeof original;
    if (getsockopt(client, SOL_IP, SO_ORIGINAL_DST, &original, &size) != 0) return std::nullopt;
    return SocketAddress{IpAddress::V4(ntohl(original.sin_addr.s_addr)), ntohs(original.sin_port)};
  }
  sockaddr_in6 original{};
  socklen_t size = sizeof original;
  if (getsockopt(client, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &original, &size) != 0)
    return std::nullopt;
  std::array<uint8_t, 16> bytes{};
  std::memcpy(bytes.data(), &original.sin6_addr, 16);
  return SocketAddress{IpAddress::V6(bytes), ntohs(original.sin6_port)};
}

std::string Joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

// Waits for fd to be ready for events, or the gateway's stop, or timeout_ms; true when ready.
bool WaitFor(const GatewayState& state, int fd, short events, int timeout_ms) {
  pollfd fds[2] = {{fd, events, 0}, {state.stop.get(), POLLIN, 0}};
  int rc;
  do rc = poll(fds, 2, timeout_ms);
  while (rc < 0 && errno == EINTR);
  return rc > 0 && fds[1].revents == 0 && fds[0].revents != 0;
}

// Reads until the first bytes name a host, say they never will, or time runs out.
FirstBytesName ReadFirstBytes(const GatewayState& state, int client, std::string& buffered) {
  char chunk[4096];
  while (buffered.size() < kMaxFirstBytes) {
    FirstBytesName seen = FindFirstBytesName(buffered);
    if (seen.state != FirstBytesName::kNeedMore) return seen;
    if (!WaitFor(state, client, POLLIN, kFirstBytesTimeoutMs)) {
      return {FirstBytesName::kNone, "", {}, "no TLS server name or HTTP Host within 10 s"};
    }
    ssize_t n = read(client, chunk, std::min(sizeof chunk, kMaxFirstBytes - buffered.size()));
    if (n <= 0 && !(n < 0 && errno == EAGAIN)) {
      return {FirstBytesName::kNone, "", {}, "closed before it named a host"};
    }
    if (n > 0) buffered.append(chunk, static_cast<size_t>(n));
  }
  return FindFirstBytesName(buffered);
}

// The reason a connection's first bytes refuse it, or nothing.
std::optional<std::string> JudgeFirstBytes(const GatewayState& state, int client, uint16_t port,
                                           std::string& buffered) {
  FirstBytesName seen = ReadFirstBytes(state, client, buffered);
  if (seen.state != FirstBytesName::kFound) {
    return fmt::format("the address is allowed by name, and the first bytes must name the host: {}",
                       seen.why);
  }
  for (const std::string& name : seen.names) {
    if (!FirstBytesNameAllowed(state.spec.policy, name, port)) {
      const char* what = std::strcmp(seen.protocol, "tls") == 0 ? "TLS server name" : "HTTP host";
      return fmt::format("the {} {} is not an allowed host on port {}", what, name, port);
    }
  }
  return std::nullopt;
}

Expected<UniqueFd> Dial(const GatewayState& state, const SocketAddress& to) {
  sockaddr_storage address{};
  socklen_t size;
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
  UniqueFd fd(socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return std::unexpected(Error::Sys("socket"));
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&address), size) != 0 && errno != EINPROGRESS) {
    return std::unexpected(Error::Sys("connect"));
  }
  if (!WaitFor(state, fd.get(), POLLOUT, kDialTimeoutMs))
    return std::unexpected(Error{"connect", "timed out", ETIMEDOUT});
  int err = 0;
  socklen_t len = sizeof err;
  getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) return std::unexpected(Error::Sys("connect", err));
  return fd;
}

// One direction of the relay: bytes read from `from`, waiting to be written to `to`.
struct Direction {
  int from, to;
  bool outbound;  // from the sandbox: counted against --net-limit
  std::string pending;
  bool eof = false;
  int64_t bytes = 0;
};

// Moves what can be moved without blocking; the reason, once the connection must end.
std::optional<std::string> Step(GatewayState& state, Direction& d, short from_events) {
  const char* side = d.outbound ? "the sandbox's side" : "the server's side";
  if ((from_events & (POLLIN | POLLHUP | POLLERR)) && d.pending.empty() && !d.eof) {
    d.pending.resize(kRelayBuffer);
    ssize_t n = read(d.from, d.pending.data(), d.pending.size());
    int err = errno;
    d.pending.resize(n > 0 ? static_cast<size_t>(n) : 0);
    if (n == 0) {
      d.eof = true;
      shutdown(d.to, SHUT_WR);
    } else if (n < 0 && err != EAGAIN) {
      return fmt::format("{} failed: {}", side, std::strerror(err));
    }
    if (n > 0 && d.outbound && state.spec.limit_bytes &&
        state.bytes_out.fetch_add(n) + n > *state.spec.limit_bytes) {
      std::lock_guard lock(state.log_mutex);
      state.limit_hit = true;
      return fmt::format("--net-limit of {} bytes out reached", *state.spec.limit_bytes);
    }
  }
  // A write is tried whenever bytes wait; EAGAIN leaves them for the next turn.
  if (!d.pending.empty()) {
    ssize_t n = send(d.to, d.pending.data(), d.pending.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN) {
      return fmt::format("{} failed: {}", d.outbound ? "the server's side" : "the sandbox's side",
                         std::strerror(errno));
    }
    if (n > 0) {
      d.bytes += n;
      d.pending.erase(0, static_cast<size_t>(n));
    }
  }
  return std::nullopt;
}

// Relays until both sides are done, one breaks, --net-limit is reached or the gateway stops;
// empty when both sides closed in order.
std::string Relay(GatewayState& state, int client, int upstream, Direction& out, Direction& in) {
  while (!(out.eof && out.pending.empty() && in.eof && in.pending.empty())) {
    auto want = [](const Direction& reading, const Direction& writing) {
      short events = 0;
      if (reading.pending.empty() && !reading.eof) events |= POLLIN;
      if (!writing.pending.empty()) events |= POLLOUT;
      return events;
    };
    pollfd fds[3] = {
        {client, want(out, in), 0}, {upstream, want(in, out), 0}, {state.stop.get(), POLLIN, 0}};
    if (poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      return "poll failed";
    }
    if (fds[2].revents) return "the sandbox ended";
    if (auto ended = Step(state, out, fds[0].revents)) return *ended;
    if (auto ended = Step(state, in, fds[1].revents)) return *ended;
  }
  return "";
}

}  // namespace

void ServeConnection(GatewayState& state, UniqueFd client, bool v6) {
  EgressEvent event;
  event.kind = "tcp";
  auto refuse = [&](std::string reason) {
    linger hard{1, 0};
    setsockopt(client.get(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    event.allowed = false;
    event.reason = std::move(reason);
    state.Log(std::move(event));
  };
  auto to = OriginalDestination(client.get(), v6);
  if (!to)
    return refuse("no original destination: the connection did not come through the redirect");
  std::vector<std::string> names = state.names.NamesFor(to->address);
  event.name = Joined(names);
  event.address = to->address.ToString();
  event.port = to->port;
  Verdict verdict = JudgeConnection(state.spec.policy, Destination{to->address, to->port, names},
                                    state.uplink.host_addresses());
  if (!verdict.allowed) return refuse(verdict.reason);
  std::string first;
  if (verdict.check_name) {
    if (auto why = JudgeFirstBytes(state, client.get(), to->port, first)) return refuse(*why);
  }
  auto upstream = Dial(state, *to);
  if (!upstream)
    return refuse(fmt::format("allowed ({}), but the dial failed: {}", verdict.reason,
                              upstream.error().ToString()));
  Direction out{client.get(), upstream->get(), true, std::move(first)};
  Direction in{upstream->get(), client.get(), false, ""};
  if (!out.pending.empty() && state.spec.limit_bytes)
    state.bytes_out += static_cast<int64_t>(out.pending.size());
  std::string ended = Relay(state, client.get(), upstream->get(), out, in);
  event.allowed = true;
  event.reason = ended.empty() ? verdict.reason : fmt::format("{}; {}", verdict.reason, ended);
  event.bytes_out = out.bytes;
  event.bytes_in = in.bytes;
  state.Log(std::move(event));
}

}  // namespace smolbox::net
