// The host's end of a VM's egress link (egress_link.h): a thread that hands each stream the
// guest opens to the egress gateway as a connection, and each DNS query to its resolver. The
// gateway judges and dials; this only carries bytes between the port and the gateway.
//
//   auto port = EgressPort::Start(std::move(host_end), *gateway);
//   ... the VM runs ...
//   port->Stop();     // before the gateway goes: the gateway's threads may still post to it
//   gateway.reset();
//   port.reset();
#pragma once

#include <memory>
#include <thread>

#include "egress_link.h"
#include "gateway.h"
#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::vm {

class EgressPort {
 public:
  // link: the host's end of the port's socket. The gateway must outlive the EgressPort.
  static Expected<std::unique_ptr<EgressPort>> Start(UniqueFd link, net::Gateway& gateway);
  // Ends the thread: nothing reaches the gateway after it. Safe to call twice.
  void Stop();
  ~EgressPort() { Stop(); }
  EgressPort(const EgressPort&) = delete;
  EgressPort& operator=(const EgressPort&) = delete;

 private:
  EgressPort(UniqueFd link, UniqueFd stop, net::Gateway& gateway);
  UniqueFd OpenStream(uint32_t stream, const SocketAddress& to);

  UniqueFd link_;
  UniqueFd stop_;  // an eventfd: readable once the port stops
  net::Gateway& gateway_;
  egress_link::LinkMux mux_;
  std::thread thread_;
};

}  // namespace smolbox::vm
