// What the gateway's threads share: the policy, the uplink, the log and the counters. Each
// connection and each query is served on a thread of its own, which holds the state alive;
// the Gateway's destructor raises `stop` and waits for them all.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
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

// One accepted connection, from its first byte to its close (relay.cc).
void ServeConnection(GatewayState& state, UniqueFd client, bool v6);
// One query from the sandbox, answered on dns to from (resolver.cc).
void ServeQuery(GatewayState& state, int dns, std::vector<uint8_t> query, sockaddr_storage from,
                socklen_t from_size);

}  // namespace smolbox::net
