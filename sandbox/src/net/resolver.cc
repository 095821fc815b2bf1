// One DNS query from the sandbox: answered from the upstream for an allowed name's A, AAAA and
// CNAME, and refused otherwise. An answer that points into the floor is a rebinding attempt,
// refused and logged; every other address is remembered for the connections that follow.
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "dns_message.h"
#include "mutant.h"
#include "gateway_state.h"

namespace smolbox::net {
namespace {

constexpr int kUpstreamTimeoutMs = 3000;
constexpr int kUpstreamTries = 2;

uint16_t RandomId() {
  uint16_t id = 0;
  if (getrandom(&id, sizeof id, 0) != sizeof id) id = static_cast<uint16_t>(getpid());
  return id;
}

// Asks the upstream, from the uplink, and waits for its reply to this very query.
Expected<DnsAnswer> AskUpstream(const GatewayState& state, const DnsQuestion& question) {
  socklen_t size = 0;
  sockaddr_storage upstream = ToSockaddr(state.uplink.dns_server(), size);
  UniqueFd fd(socket(upstream.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return std::unexpected(Error::Sys("socket for the upstream resolver"));
  // Connected, so that the kernel drops datagrams from anyone but the upstream.
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&upstream), size) != 0) {
    return std::unexpected(
        Error::Sys("connect to the upstream resolver " + state.uplink.dns_server().ToString()));
  }
  for (int attempt = 0; attempt < kUpstreamTries; ++attempt) {
    uint16_t id = RandomId();
    std::vector<uint8_t> query = UpstreamQuery(question, id);
    if (send(fd.get(), query.data(), query.size(), MSG_NOSIGNAL) < 0) {
      return std::unexpected(Error::Sys("send to the upstream resolver"));
    }
    pollfd fds[2] = {{fd.get(), POLLIN, 0}, {state.stop.get(), POLLIN, 0}};
    while (poll(fds, 2, kUpstreamTimeoutMs) > 0 && !fds[1].revents) {
      std::vector<uint8_t> reply(4096);
      ssize_t n = recv(fd.get(), reply.data(), reply.size(), 0);
      if (n < 0) {
        if (errno == EAGAIN) continue;
        return std::unexpected(Error::Sys("receive from the upstream resolver"));
      }
      reply.resize(static_cast<size_t>(n));
      // Anything but the answer to this query (a late reply, a forgery) is passed over.
      auto answer = ParseUpstreamReply(reply, question, id, NameMemory::kMaxTtlSeconds);
      if (answer) return answer;
    }
    if (fds[1].revents) break;
  }
  return std::unexpected(Error{"the upstream resolver " + state.uplink.dns_server().ToString(),
                               "did not answer", ETIMEDOUT});
}

bool Answerable(uint16_t type) {
  return type == kDnsTypeA || type == kDnsTypeAaaa || type == kDnsTypeCname;
}

// The floor reason of the first address that lands in it, for a rebinding attempt.
std::optional<std::string> Rebinding(const GatewayState& state, const DnsAnswer& answer) {
  for (const auto& [address, ttl] : answer.addresses) {
    if (auto floor = FloorReason(address, state.uplink.host_addresses())) {
      return fmt::format("rebinding: it resolved to {}, which is in the floor: {}",
                         address.ToString(), *floor);
    }
  }
  return std::nullopt;
}

// The reply for question, and the event that says what was decided.
std::vector<uint8_t> Decide(GatewayState& state, const DnsQuestion& q, EgressEvent& event) {
  if (q.klass != kDnsClassIn) {
    event.reason = "only class IN is answered";
    return DnsErrorReply(q.id, &q, kRcodeRefused);
  }
  const bool filter = SMOLBOX_PROTECTED("dns_filter");
  if (filter && !NameAllowed(state.spec.policy, q.name)) {
    event.reason = "no --allow-host covers this name";
    return DnsErrorReply(q.id, &q, kRcodeNxdomain);
  }
  if (filter && !Answerable(q.type)) {
    event.reason = "only A, AAAA and CNAME queries are answered";
    return DnsErrorReply(q.id, &q, kRcodeRefused);
  }
  auto answer = AskUpstream(state, q);
  if (!answer) {
    event.reason = answer.error().ToString();
    return DnsErrorReply(q.id, &q, kRcodeServfail);
  }
  if (auto why = Rebinding(state, *answer); why && SMOLBOX_PROTECTED("dns_rebinding")) {
    event.reason = *why;
    return DnsErrorReply(q.id, &q, kRcodeRefused);
  }
  for (const auto& [address, ttl] : answer->addresses) {
    state.names.Remember(q.name, address, ttl);
    event.address += (event.address.empty() ? "" : ",") + address.ToString();
  }
  event.allowed = true;
  event.reason = answer->rcode == 0 ? "answered by the upstream"
                                    : fmt::format("the upstream's rcode {}", answer->rcode);
  return std::move(answer->reply);
}

}  // namespace

std::vector<uint8_t> AnswerQuery(GatewayState& state, const std::vector<uint8_t>& query) {
  EgressEvent event;
  event.kind = "dns";
  std::vector<uint8_t> reply;
  auto question = ParseDnsQuery(query);
  if (question) {
    event.name = question->name;
    event.type = DnsTypeName(question->type);
    reply = Decide(state, *question, event);
  } else {
    uint16_t id = 0;
    event.reason = question.error().ToString();
    if (DnsHeaderId(query, id)) reply = DnsErrorReply(id, nullptr, kRcodeRefused);
  }
  state.Log(std::move(event));
  return reply;
}

}  // namespace smolbox::net
