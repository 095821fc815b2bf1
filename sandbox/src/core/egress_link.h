// The vm backend's egress link: one virtio-serial port that carries a guest's TCP connections
// and DNS queries to the host's egress gateway (net/gateway.h), which judges and dials them.
// The guest has no NIC: a compromised guest kernel can only talk to this port, and the host
// side dials nothing it did not judge first. Both ends run a LinkMux over the port.
//
// Frames are the channel's (channel.h), a JSON header and a binary tail:
//   guest -> host  {"type":"open","stream":N,"to":"203.0.113.5:443"}
//                  {"type":"dns","query":N}                tail = the query
//   host -> guest  {"type":"dns_reply","query":N}          tail = the reply
//   both ways      {"type":"data","stream":N}              tail = bytes
//                  {"type":"credit","stream":N,"bytes":K}  K more bytes may be sent
//                  {"type":"eof","stream":N}               no more bytes this way
//                  {"type":"reset","stream":N}             the stream is gone: reset it
//
// Each direction of a stream has a window of kWindowBytes: a side sends only what the other
// has credited, so neither holds more than a window per stream for a peer that stops reading,
// and one slow stream never stalls the others on the shared port.
//
//   egress_link::LinkMux mux(port_fd, hooks);
//   mux.Watch(listener, [&] { mux.Open(Accept(listener), destination); });
//   auto ended = mux.Run(stop_fd);
#pragma once

#include <poll.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "channel.h"
#include "smolbox/egress_policy.h"
#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::egress_link {

// The virtio-serial port's name.
inline constexpr const char* kEgressPortName = "smolbox.egress";
inline constexpr size_t kWindowBytes = 256 << 10;
inline constexpr size_t kChunkBytes = 64 << 10;
// Open streams at once; the host's gateway caps them lower (--net-connections).
inline constexpr size_t kMaxStreams = 4096;
// Frames waiting for the port: past this the peer is not reading, and the link ends.
inline constexpr size_t kMaxQueuedBytes = 32 << 20;

// Where a connection that an nftables redirect brought to a listener was going: conntrack's
// original destination. v6: it came to the IPv6 listener.
std::optional<SocketAddress> OriginalDestination(int fd, bool v6);

class LinkMux {
 public:
  struct Hooks {
    // The host's: a stream the guest opened, to `to`. The local end to relay it through, or an
    // invalid fd to reset it at once.
    std::function<UniqueFd(uint32_t stream, const SocketAddress& to)> opened;
    // The host's: a DNS query. The guest's: a reply to one it sent.
    std::function<void(uint32_t query, std::string bytes)> query;
    std::function<void(uint32_t query, std::string bytes)> reply;
  };

  // link: the port, nonblocking. Frames of a kind the hooks do not take end the link.
  LinkMux(int link, Hooks hooks);
  LinkMux(const LinkMux&) = delete;
  LinkMux& operator=(const LinkMux&) = delete;

  // The guest's: relays fd (a connection the workload made) as a new stream to `to`.
  void Open(UniqueFd fd, const SocketAddress& to);
  // Queues a "dns" (guest) or "dns_reply" (host) frame.
  void SendDns(const char* type, uint32_t query, std::string bytes);
  // Resets a stream from this side: the host's, when the gateway refused it.
  void Reset(uint32_t stream);
  // Calls ready whenever fd is readable (the guest's listeners).
  void Watch(int fd, std::function<void()> ready);
  // Thread-safe: runs work on Run's thread, before it looks at any stream again.
  void Post(std::function<void()> work);

  // Relays until the peer closes the port (success), stop_fd is readable (success), or the
  // link breaks or the peer breaks the protocol (the error).
  Expected<void> Run(int stop_fd);

  size_t open_streams() const { return streams_.size(); }

 private:
  struct Stream {
    UniqueFd fd;
    std::string to_local;          // from the peer, not yet written to fd
    size_t credit = kWindowBytes;  // what the peer still takes
    size_t unreported = 0;         // written to fd, not yet credited back
    bool local_eof = false;        // fd ended; "eof" went out
    bool peer_eof = false;         // the peer's "eof": fd's write side shuts once to_local is out
  };

  void Queue(nlohmann::json header, std::string tail = "");
  Expected<void> Flush();
  Expected<void> ReadLink(bool& closed);
  Expected<void> Handle(const channel::Message& frame);
  Expected<void> HandleStreamFrame(const std::string& type, const channel::Message& frame);
  void ReadLocal(uint32_t id, Stream& stream);
  void WriteLocal(uint32_t id, Stream& stream);
  void CloseIfDone(uint32_t id);
  void Drop(uint32_t id, bool reset_peer);
  void RunPosted();

  int link_;
  bool link_is_socket_;  // the host's end: sent to without SIGPIPE; the guest's is a device
  Hooks hooks_;
  channel::FrameReader reader_{"egress link frame"};
  std::deque<std::string> out_;  // encoded frames for the port
  size_t out_offset_ = 0;        // of the front frame, written already
  size_t out_bytes_ = 0;
  std::map<uint32_t, Stream> streams_;
  uint32_t next_stream_ = 1;
  std::vector<std::pair<int, std::function<void()>>> watches_;
  UniqueFd posted_event_;  // an eventfd: readable when work is posted
  std::mutex posted_mutex_;
  std::vector<std::function<void()>> posted_;
};

}  // namespace smolbox::egress_link
