// One TCP connection through the gateway: where the workload meant to go, the verdict, the
// name its first bytes carry, the dial from the uplink, and the bytes each way.
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <optional>

#include "egress_link.h"
#include "first_bytes.h"
#include "gateway_state.h"
#include "mutant.h"

namespace smolbox::net {
namespace {

constexpr int kFirstBytesTimeoutMs = 10000;
constexpr int kDialTimeoutMs = 10000;
constexpr size_t kRelayBuffer = 1024 * 1024;

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
  socklen_t size = 0;
  sockaddr_storage address = ToSockaddr(to, size);
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

// One direction of the relay: bytes spliced from `from` into a pipe, and from the pipe to `to`,
// so that they cross without being copied through the gateway's memory.
struct Direction {
  int from, to;
  bool outbound;  // from the sandbox: counted against --net-limit
  UniqueFd pipe_read, pipe_write;
  size_t in_pipe = 0;
  bool eof = false;
  int64_t bytes = 0;
};

Expected<void> MakePipe(Direction& d) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
    return std::unexpected(Error::Sys("pipe2 for the relay"));
  d.pipe_read.Reset(fds[0]);
  d.pipe_write.Reset(fds[1]);
  // A larger pipe moves more per splice; where the kernel refuses, the default still works.
  fcntl(fds[1], F_SETPIPE_SZ, kRelayBuffer);
  return {};
}

// Counts n bytes the sandbox is about to send against --net-limit, across all its connections;
// the reason once the limit is passed, before those bytes leave.
std::optional<std::string> CountOut(GatewayState& state, int64_t n) {
  if (!state.spec.limit_bytes || !SMOLBOX_PROTECTED("net_limit")) return std::nullopt;
  if (state.bytes_out.fetch_add(n) + n <= *state.spec.limit_bytes) return std::nullopt;
  std::lock_guard lock(state.log_mutex);
  state.limit_hit = true;
  return fmt::format("--net-limit of {} bytes out reached", *state.spec.limit_bytes);
}

// Moves what can be moved without blocking, once; the reason, once the connection must end.
std::optional<std::string> StepOnce(GatewayState& state, Direction& d, short from_events) {
  const char* reading = d.outbound ? "the sandbox's side" : "the server's side";
  const char* writing = d.outbound ? "the server's side" : "the sandbox's side";
  constexpr unsigned kFlags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;
  if ((from_events & (POLLIN | POLLHUP | POLLERR)) && d.in_pipe == 0 && !d.eof) {
    ssize_t n = splice(d.from, nullptr, d.pipe_write.get(), nullptr, kRelayBuffer, kFlags);
    if (n == 0) {
      d.eof = true;
      shutdown(d.to, SHUT_WR);
    } else if (n < 0 && errno != EAGAIN) {
      return fmt::format("{} failed: {}", reading, std::strerror(errno));
    }
    if (n > 0) d.in_pipe = static_cast<size_t>(n);
    if (n > 0 && d.outbound) {
      if (auto reached = CountOut(state, n)) return reached;
    }
  }
  // A write is tried whenever bytes wait; EAGAIN leaves them for the next turn.
  if (d.in_pipe > 0) {
    ssize_t n = splice(d.pipe_read.get(), nullptr, d.to, nullptr, d.in_pipe, kFlags);
    if (n < 0 && errno != EAGAIN)
      return fmt::format("{} failed: {}", writing, std::strerror(errno));
    if (n > 0) {
      d.bytes += n;
      d.in_pipe -= static_cast<size_t>(n);
    }
  }
  return std::nullopt;
}

// Moves until nothing more moves, a few turns at most: a poll per turn would cost more than the
// bytes a turn moves.
std::optional<std::string> Step(GatewayState& state, Direction& d, short from_events) {
  constexpr int kTurns = 8;
  for (int turn = 0; turn < kTurns; ++turn) {
    int64_t before = d.bytes;
    bool was_eof = d.eof;
    if (auto ended = StepOnce(state, d, turn == 0 ? from_events : POLLIN)) return ended;
    if (d.bytes == before && d.eof == was_eof) break;
  }
  return std::nullopt;
}

// The first bytes, read to judge the name, go on to the server before the relay starts. They
// count against --net-limit like every other byte out: a request that names its host may carry
// a body in the same read.
std::optional<std::string> SendFirstBytes(GatewayState& state, int upstream,
                                          const std::string& first, Direction& out) {
  if (auto reached = CountOut(state, static_cast<int64_t>(first.size()))) return reached;
  for (size_t sent = 0; sent < first.size();) {
    ssize_t n =
        send(upstream, first.data() + sent, first.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN)
      return fmt::format("the server's side failed: {}", std::strerror(errno));
    if (n > 0) sent += static_cast<size_t>(n);
    if (n < 0 && !WaitFor(state, upstream, POLLOUT, kDialTimeoutMs))
      return "the server took no bytes within 10 s";
  }
  out.bytes += static_cast<int64_t>(first.size());
  return std::nullopt;
}

// Relays until both sides are done, one breaks, --net-limit is reached or the gateway stops;
// empty when both sides closed in order.
std::string Relay(GatewayState& state, int client, int upstream, Direction& out, Direction& in) {
  while (!(out.eof && out.in_pipe == 0 && in.eof && in.in_pipe == 0)) {
    auto want = [](const Direction& reading, const Direction& writing) {
      short events = 0;
      if (reading.in_pipe == 0 && !reading.eof) events |= POLLIN;
      if (writing.in_pipe > 0) events |= POLLOUT;
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

void ServeConnection(GatewayState& state, UniqueFd client, const ConnectionOrigin& origin) {
  EgressEvent event;
  event.kind = "tcp";
  auto refuse = [&](std::string reason) {
    if (origin.refused) origin.refused();
    linger hard{1, 0};
    setsockopt(client.get(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    event.allowed = false;
    event.reason = std::move(reason);
    state.Log(std::move(event));
  };
  auto to = origin.to ? origin.to : egress_link::OriginalDestination(client.get(), origin.v6);
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
  if (verdict.check_name && SMOLBOX_PROTECTED("first_bytes_check")) {
    if (auto why = JudgeFirstBytes(state, client.get(), to->port, first)) return refuse(*why);
  }
  auto upstream = Dial(state, *to);
  if (!upstream)
    return refuse(fmt::format("allowed ({}), but the dial failed: {}", verdict.reason,
                              upstream.error().ToString()));
  Direction out{client.get(), upstream->get(), true, {}, {}};
  Direction in{upstream->get(), client.get(), false, {}, {}};
  if (auto made = MakePipe(out); !made) return refuse(made.error().ToString());
  if (auto made = MakePipe(in); !made) return refuse(made.error().ToString());
  std::optional<std::string> failed = SendFirstBytes(state, upstream->get(), first, out);
  std::string ended = failed ? *failed : Relay(state, client.get(), upstream->get(), out, in);
  event.allowed = true;
  event.reason = ended.empty() ? verdict.reason : fmt::format("{}; {}", verdict.reason, ended);
  event.bytes_out = out.bytes;
  event.bytes_in = in.bytes;
  state.Log(std::move(event));
}

}  // namespace smolbox::net
