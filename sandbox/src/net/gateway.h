// The egress gateway: the one way out of a sandbox that may reach the network. It answers the
// sandbox's DNS and accepts its TCP connections on sockets made inside the sandbox, judges each
// by the policy (egress_policy.h), and dials what it allows itself, from the uplink. A sandbox,
// or a guest kernel, reaches no socket the gateway did not make after checking.
//
//   auto uplink = net::Uplink::Open(spec.egress.netns, spec.egress.dns_server);
//   auto gateway = net::Gateway::Start(spec.egress, std::move(*uplink), std::move(listeners));
//   ... the workload runs ...
//   result.egress = (*gateway)->TakeLog();
#pragma once

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "smolbox/result.h"
#include "smolbox/spec.h"
#include "unique_fd.h"
#include "uplink.h"

namespace smolbox::net {

// Listening sockets made in the sandbox's network namespace (sandbox_side.h).
struct GatewayListeners {
  UniqueFd tcp4;  // where TCP over IPv4 is redirected
  UniqueFd tcp6;  // and over IPv6
  UniqueFd dns;   // UDP, the resolver the sandbox's resolv.conf names
};

struct GatewayState;
struct ConnectionOrigin;

class Gateway {
 public:
  static Expected<std::unique_ptr<Gateway>> Start(const EgressSpec& spec, Uplink uplink,
                                                  GatewayListeners listeners);
  // Closes every connection and waits for the gateway's threads.
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // A connection that came another way than the listeners (the vm's egress link), going to
  // `to`; refused is called, from a gateway thread, before a refused one is closed.
  void Adopt(UniqueFd stream, const SocketAddress& to, std::function<void()> refused);
  // A DNS query that came another way; reply is called, from a gateway thread, with the
  // answer, unless the query was too malformed to answer at all.
  void Answer(std::vector<uint8_t> query, std::function<void(std::vector<uint8_t>)> reply);

  // What was decided since the last call: each query and connection, in order.
  std::vector<EgressEvent> TakeLog();
  // Whether --net-limit was reached since the last call.
  bool TakeLimitHit();

 private:
  explicit Gateway(std::shared_ptr<GatewayState> state);
  void Serve();
  void Admit(UniqueFd client, ConnectionOrigin origin);
  void ReceiveQuery();

  std::shared_ptr<GatewayState> state_;
  GatewayListeners listeners_;  // the loop's own, from its start
  std::thread loop_;
};

}  // namespace smolbox::net
