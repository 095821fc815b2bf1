#include "egress_port.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

namespace smolbox::vm {

EgressPort::EgressPort(UniqueFd link, UniqueFd stop, net::Gateway& gateway)
    : link_(std::move(link)),
      stop_(std::move(stop)),
      gateway_(gateway),
      mux_(link_.get(), egress_link::LinkMux::Hooks{
                            .opened = [this](uint32_t stream, const SocketAddress& to) {
                              return OpenStream(stream, to);
                            },
                            .query =
                                [this](uint32_t query, std::string bytes) {
                                  gateway_.Answer(
                                      std::vector<uint8_t>(bytes.begin(), bytes.end()),
                                      [this, query](std::vector<uint8_t> reply) {
                                        mux_.Post([this, query, r = std::move(reply)]() mutable {
                                          mux_.SendDns("dns_reply", query,
                                                       std::string(r.begin(), r.end()));
                                        });
                                      });
                                },
                            .reply = nullptr}) {}

Expected<std::unique_ptr<EgressPort>> EgressPort::Start(UniqueFd link, net::Gateway& gateway) {
  if (fcntl(link.get(), F_SETFL, fcntl(link.get(), F_GETFL) | O_NONBLOCK) != 0)
    return std::unexpected(Error::Sys("fcntl the egress link"));
  UniqueFd stop(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop.valid()) return std::unexpected(Error::Sys("eventfd for the egress link"));
  std::unique_ptr<EgressPort> port(new EgressPort(std::move(link), std::move(stop), gateway));
  port->thread_ = std::thread([p = port.get()] {
    // A guest that breaks the protocol loses its network, and only that: the run goes on, and
    // its connections fail.
    (void)p->mux_.Run(p->stop_.get());
  });
  return port;
}

void EgressPort::Stop() {
  uint64_t one = 1;
  if (write(stop_.get(), &one, sizeof one) != sizeof one) {
    // An eventfd write of 1 fails only on overflow, which a single write cannot reach.
  }
  if (thread_.joinable()) thread_.join();
}

// The stream's two ends: the mux relays one with the port, the gateway serves the other as the
// connection. A refusal resets the guest's side too, so that its connect sees ECONNRESET.
UniqueFd EgressPort::OpenStream(uint32_t stream, const SocketAddress& to) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0) return {};
  UniqueFd ours(pair[0]);
  gateway_.Adopt(UniqueFd(pair[1]), to,
                 [this, stream] { mux_.Post([this, stream] { mux_.Reset(stream); }); });
  return ours;
}

}  // namespace smolbox::vm
