// What the gateway's threads share: the policy, the uplink, the log and the counters. Each
// connection and each query is served on a thread of its own, which holds the state alive;
// the Gateway's destructor raises `stop` and waits for them all.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "name_memory.h"
#include "smolbox/result.h"
#include "smolbox/spec.h"
#include "unique_fd.h"
#include "uplink.h"

namespace smolbox::net {

struct GatewayState {
  EgressSpec spec;
  Uplink uplink;
  NameMemory names;
  UniqueFd stop;  // an eventfd: readable once the gateway stops

  // The log is bounded: a workload that opens connections without end must not grow it so.
  static constexpr size_t kMaxLogEvents = 10000;
  std::mutex log_mutex;
  std::vector<EgressEvent> log;
  int64_t unlogged = 0;
  bool limit_hit = false;

  std::atomic<int64_t> bytes_out{0};  // all connections, for --net-limit
  std::atomic<int64_t> connections{0};
  std::atomic<int> queries{0};

  std::mutex workers_mutex;
  std::condition_variable workers_done;
  int workers = 0;

  void Log(EgressEvent event);
};

// How a connection reached the gateway: accepted from a redirect's listener, whose original
// destination conntrack knows, or handed over by the vm's egress link with the destination the
// guest's agent read there.
struct ConnectionOrigin {
  bool v6 = false;                 // accepted on the IPv6 listener
  std::optional<SocketAddress> to;  // handed over: where it was going
  std::function<void()> refused;    // handed over: called before a refused one is closed
};

// One connection, from its first byte to its close (relay.cc).
void ServeConnection(GatewayState& state, UniqueFd client, const ConnectionOrigin& origin);
// One query from the sandbox: its reply (empty when there is none to give) (resolver.cc).
std::vector<uint8_t> AnswerQuery(GatewayState& state, const std::vector<uint8_t>& query);

}  // namespace smolbox::net
