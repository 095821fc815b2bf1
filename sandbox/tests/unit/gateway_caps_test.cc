// The egress gateway's own bounds, in process: the queries it lets wait on the upstream at once,
// and the events its log keeps. Queries come through Gateway::Answer, as the vm's egress port
// sends them; the upstream is a socket on this host's loopback.
#include "gateway.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace smolbox::net {
namespace {

// A query for name's A record, as a stub resolver sends it.
std::vector<uint8_t> Query(uint16_t id, const std::string& name) {
  std::vector<uint8_t> q = {static_cast<uint8_t>(id >> 8), static_cast<uint8_t>(id), 1, 0, 0, 1,
                            0, 0, 0, 0, 0, 0};
  for (size_t at = 0; at <= name.size();) {
    size_t dot = std::min(name.find('.', at), name.size());
    q.push_back(static_cast<uint8_t>(dot - at));
    q.insert(q.end(), name.begin() + static_cast<long>(at), name.begin() + static_cast<long>(dot));
    at = dot + 1;
  }
  q.insert(q.end(), {0, 0, 1, 0, 1});
  return q;
}

int Rcode(const std::vector<uint8_t>& reply) { return reply.size() > 3 ? reply[3] & 15 : -1; }

// An upstream that takes queries and never answers: each one waits out its timeout.
struct SilentUpstream {
  UniqueFd fd{socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)};
  SocketAddress address;
  SilentUpstream() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof a;
    EXPECT_EQ(bind(fd.get(), reinterpret_cast<sockaddr*>(&a), size), 0);
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &size);
    address = SocketAddress{IpAddress::V4(ntohl(a.sin_addr.s_addr)), ntohs(a.sin_port)};
  }
};

std::unique_ptr<Gateway> StartGateway(const SocketAddress& upstream) {
  EgressSpec spec;
  spec.policy.allow_hosts.push_back(*ParseHostRule("api.allowed.test", "--allow-host"));
  auto uplink = Uplink::Open("", upstream);
  EXPECT_TRUE(uplink) << uplink.error().ToString();
  auto gateway = Gateway::Start(spec, std::move(*uplink), {});
  EXPECT_TRUE(gateway) << gateway.error().ToString();
  return std::move(*gateway);
}

// Replies as they come back from the gateway's threads.
struct Replies {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::vector<uint8_t>> got;
  std::function<void(std::vector<uint8_t>)> Sink() {
    return [this](std::vector<uint8_t> reply) {
      std::lock_guard lock(mutex);
      got.push_back(std::move(reply));
      changed.notify_all();
    };
  }
  bool WaitFor(size_t count) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, std::chrono::seconds(20), [&] { return got.size() >= count; });
  }
};

TEST(GatewayCaps, queries_past_32_waiting_on_the_upstream_get_servfail_at_once) {
  SilentUpstream upstream;
  Replies replies;  // before the gateway: its threads reply until the gateway is gone
  auto gateway = StartGateway(upstream.address);
  for (uint16_t id = 1; id <= 40; ++id) gateway->Answer(Query(id, "api.allowed.test"), replies.Sink());
  // The 32 in flight wait seconds on the silent upstream; the 8 past the cap are answered now.
  ASSERT_TRUE(replies.WaitFor(8));
  std::lock_guard lock(replies.mutex);
  EXPECT_EQ(replies.got.size(), 8u);
  for (const auto& reply : replies.got) EXPECT_EQ(Rcode(reply), 2);  // SERVFAIL
}

TEST(GatewayCaps, the_log_keeps_ten_thousand_events_and_then_counts_the_rest) {
  SilentUpstream upstream;  // never asked: other.test is not allowed, and NXDOMAIN is local
  Replies replies;
  auto gateway = StartGateway(upstream.address);
  constexpr size_t kQueries = 10025;
  // One at a time, so that none meets the cap on queries in flight.
  for (size_t i = 0; i < kQueries; ++i) {
    gateway->Answer(Query(static_cast<uint16_t>(i), "other.test"), replies.Sink());
    ASSERT_TRUE(replies.WaitFor(i + 1)) << i;
  }
  auto log = gateway->TakeLog();
  ASSERT_EQ(log.size(), 10001u);
  EXPECT_EQ(log[0].kind, "dns");
  EXPECT_EQ(log[0].name, "other.test");
  EXPECT_FALSE(log[0].allowed);
  EXPECT_EQ(log.back().kind, "note");
  EXPECT_NE(log.back().reason.find("25 more events"), std::string::npos) << log.back().reason;
  EXPECT_EQ(Rcode(replies.got.back()), 3);  // NXDOMAIN
  // The next exec's log starts empty.
  EXPECT_TRUE(gateway->TakeLog().empty());
}

}  // namespace
}  // namespace smolbox::net
