#include "egress_link.h"

// netinet/in.h first: the kernel's netfilter headers then take its definitions of in_addr.
#include <netinet/in.h>

#include <fmt/format.h>
#include <linux/netfilter_ipv4.h>
#include <linux/netfilter_ipv6/ip6_tables.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "json_message.h"

namespace smolbox::egress_link {
namespace {

struct StreamFrame {
  uint32_t stream = 0;
};
struct CreditFrame {
  uint32_t stream = 0;
  uint32_t bytes = 0;
};
struct OpenFrame {
  uint32_t stream = 0;
  std::string to;
};
struct DnsFrame {
  uint32_t query = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StreamFrame, stream)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CreditFrame, stream, bytes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(OpenFrame, stream, to)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DnsFrame, query)

Error Broken(std::string what) { return Error{"egress link", std::move(what), EPROTO}; }


bool IsSocket(int fd) {
  struct stat st{};
  return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
}

}  // namespace

std::optional<SocketAddress> OriginalDestination(int fd, bool v6) {
  if (!v6) {
    sockaddr_in original{};
    socklen_t size = sizeof original;
    if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &original, &size) != 0) return std::nullopt;
    return SocketAddress{IpAddress::V4(ntohl(original.sin_addr.s_addr)), ntohs(original.sin_port)};
  }
  sockaddr_in6 original{};
  socklen_t size = sizeof original;
  if (getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &original, &size) != 0) return std::nullopt;
  std::array<uint8_t, 16> bytes{};
  std::memcpy(bytes.data(), &original.sin6_addr, 16);
  return SocketAddress{IpAddress::V6(bytes), ntohs(original.sin6_port)};
}

LinkMux::LinkMux(int link, Hooks hooks)
    : link_(link),
      link_is_socket_(IsSocket(link)),
      hooks_(std::move(hooks)),
      posted_event_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

void LinkMux::Queue(nlohmann::json header, std::string tail) {
  std::string frame = channel::Encode(channel::Message{std::move(header), std::move(tail)});
  out_bytes_ += frame.size();
  out_.push_back(std::move(frame));
}

void LinkMux::Open(UniqueFd fd, const SocketAddress& to) {
  if (streams_.size() >= kMaxStreams) {
    linger hard{1, 0};
    setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    return;
  }
  uint32_t id = next_stream_++;
  Queue({{"type", "open"}, {"stream", id}, {"to", to.ToString()}});
  streams_[id].fd = std::move(fd);
}

void LinkMux::SendDns(const char* type, uint32_t query, std::string bytes) {
  Queue({{"type", type}, {"query", query}}, std::move(bytes));
}

void LinkMux::Reset(uint32_t stream) {
  if (streams_.contains(stream)) Drop(stream, true);
}

void LinkMux::Watch(int fd, std::function<void()> ready) {
  watches_.emplace_back(fd, std::move(ready));
}

void LinkMux::Post(std::function<void()> work) {
  {
    std::lock_guard lock(posted_mutex_);
    posted_.push_back(std::move(work));
  }
  uint64_t one = 1;
  if (write(posted_event_.get(), &one, sizeof one) != sizeof one) {
    // Only an eventfd at its maximum count refuses, and then it is readable already.
  }
}

void LinkMux::RunPosted() {
  uint64_t count = 0;
  if (read(posted_event_.get(), &count, sizeof count) < 0) {
    // EAGAIN: nothing was posted since the last turn.
  }
  std::vector<std::function<void()>> work;
  {
    std::lock_guard lock(posted_mutex_);
    work.swap(posted_);
  }
  for (auto& w : work) w();
}

// Drops a stream; reset_peer: the peer is told to reset its end too, and the local end is
// reset rather than closed, so that both connections see ECONNRESET.
void LinkMux::Drop(uint32_t id, bool reset_peer) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  linger hard{1, 0};
  setsockopt(it->second.fd.get(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
  streams_.erase(it);
  if (reset_peer) Queue({{"type", "reset"}, {"stream", id}});
}

void LinkMux::CloseIfDone(uint32_t id) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  const Stream& s = it->second;
  if (s.local_eof && s.peer_eof && s.to_local.empty()) streams_.erase(it);
}

void LinkMux::ReadLocal(uint32_t id, Stream& stream) {
  std::string chunk(std::min(stream.credit, kChunkBytes), '\0');
  ssize_t n = read(stream.fd.get(), chunk.data(), chunk.size());
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n < 0) return Drop(id, true);
  if (n == 0) {
    stream.local_eof = true;
    Queue({{"type", "eof"}, {"stream", id}});
    return CloseIfDone(id);
  }
  chunk.resize(static_cast<size_t>(n));
  stream.credit -= chunk.size();
  Queue({{"type", "data"}, {"stream", id}}, std::move(chunk));
}

void LinkMux::WriteLocal(uint32_t id, Stream& stream) {
  while (!stream.to_local.empty()) {
    ssize_t n = send(stream.fd.get(), stream.to_local.data(), stream.to_local.size(),
                     MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n < 0) return Drop(id, true);
    stream.to_local.erase(0, static_cast<size_t>(n));
    stream.unreported += static_cast<size_t>(n);
  }
  // Credit in quarters of the window, or at once when everything is out: fewer frames, and the
  // peer never waits on a credit for bytes already written.
  if (stream.unreported > 0 &&
      (stream.to_local.empty() || stream.unreported >= kWindowBytes / 4)) {
    Queue({{"type", "credit"}, {"stream", id}, {"bytes", stream.unreported}});
    stream.unreported = 0;
  }
  if (stream.to_local.empty() && stream.peer_eof) shutdown(stream.fd.get(), SHUT_WR);
  CloseIfDone(id);
}

Expected<void> LinkMux::HandleStreamFrame(const std::string& type, const channel::Message& frame) {
  if (type == "credit") {
    static const MessageShape shape{CreditFrame{}};
    SMOLBOX_ASSIGN_OR_RETURN(auto c, DecodeMessage<CreditFrame>(frame.header, shape, "credit frame"));
    auto it = streams_.find(c.stream);
    if (it == streams_.end()) return {};  // a stream that ended while the credit was under way
    if (c.bytes > kWindowBytes - it->second.credit)
      return std::unexpected(Broken("a credit past the window"));
    it->second.credit += c.bytes;
    return {};
  }
  static const MessageShape shape{StreamFrame{}};
  SMOLBOX_ASSIGN_OR_RETURN(auto f, DecodeMessage<StreamFrame>(frame.header, shape, type + " frame"));
  auto it = streams_.find(f.stream);
  // A frame for a stream that ended here while it was under way: a reset crossed it.
  if (it == streams_.end()) return {};
  Stream& s = it->second;
  if (type == "reset") {
    Drop(f.stream, false);
  } else if (type == "eof") {
    s.peer_eof = true;
    WriteLocal(f.stream, s);
  } else {  // data
    if (s.peer_eof) return std::unexpected(Broken("data after eof"));
    if (frame.tail.size() > kWindowBytes - s.to_local.size() - s.unreported)
      return std::unexpected(Broken("data past the window"));
    s.to_local += frame.tail;
    WriteLocal(f.stream, s);
  }
  return {};
}

Expected<void> LinkMux::Handle(const channel::Message& frame) {
  const std::string type = frame.Type();
  if (type == "data" || type == "eof" || type == "reset" || type == "credit")
    return HandleStreamFrame(type, frame);
  if (type == "open" && hooks_.opened) {
    static const MessageShape shape{OpenFrame{}};
    SMOLBOX_ASSIGN_OR_RETURN(auto o, DecodeMessage<OpenFrame>(frame.header, shape, "open frame"));
    SMOLBOX_ASSIGN_OR_RETURN(auto to, ParseSocketAddress(o.to, 0, "open frame's to"));
    if (streams_.contains(o.stream)) return std::unexpected(Broken("a stream opened twice"));
    if (streams_.size() >= kMaxStreams) {
      Queue({{"type", "reset"}, {"stream", o.stream}});
      return {};
    }
    UniqueFd local = hooks_.opened(o.stream, to);
    if (!local.valid()) {
      Queue({{"type", "reset"}, {"stream", o.stream}});
      return {};
    }
    streams_[o.stream].fd = std::move(local);
    return {};
  }
  auto& dns = type == "dns" ? hooks_.query : hooks_.reply;
  if ((type == "dns" || type == "dns_reply") && dns) {
    static const MessageShape shape{DnsFrame{}};
    SMOLBOX_ASSIGN_OR_RETURN(auto d, DecodeMessage<DnsFrame>(frame.header, shape, type + " frame"));
    dns(d.query, frame.tail);
    return {};
  }
  return std::unexpected(Broken(fmt::format("unexpected frame \"{}\"", type)));
}

Expected<void> LinkMux::ReadLink(bool& closed) {
  char buffer[kChunkBytes];
  for (;;) {
    ssize_t n = read(link_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n < 0) return std::unexpected(Error::Sys("read the egress link"));
    if (n == 0) {
      closed = true;
      break;
    }
    reader_.Feed(buffer, static_cast<size_t>(n));
    if (static_cast<size_t>(n) < sizeof buffer) break;
  }
  for (;;) {
    auto frame = reader_.Next();
    if (!frame) return std::unexpected(frame.error());
    if (!*frame) return {};
    SMOLBOX_TRY(Handle(**frame));
  }
}

Expected<void> LinkMux::Flush() {
  while (!out_.empty()) {
    const std::string& front = out_.front();
    const char* data = front.data() + out_offset_;
    size_t size = front.size() - out_offset_;
    ssize_t n = link_is_socket_ ? send(link_, data, size, MSG_NOSIGNAL | MSG_DONTWAIT)
                                : write(link_, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n < 0) return std::unexpected(Error::Sys("write the egress link"));
    out_offset_ += static_cast<size_t>(n);
    out_bytes_ -= static_cast<size_t>(n);
    if (out_offset_ == front.size()) {
      out_.pop_front();
      out_offset_ = 0;
    }
  }
  if (out_bytes_ > kMaxQueuedBytes)
    return std::unexpected(Broken("the peer stopped reading the link"));
  return {};
}

Expected<void> LinkMux::Run(int stop_fd) {
  for (;;) {
    // stop, posted work, the link, the watches, then one entry per stream.
    std::vector<pollfd> fds = {{stop_fd, POLLIN, 0},
                               {posted_event_.get(), POLLIN, 0},
                               {link_, static_cast<short>(POLLIN | (out_.empty() ? 0 : POLLOUT)), 0}};
    for (const auto& [fd, ready] : watches_) fds.push_back({fd, POLLIN, 0});
    const size_t first_stream = fds.size();
    std::vector<uint32_t> ids;
    // Reading a stream stops while the link is backed up: its frames would only queue here.
    const bool link_backed_up = out_bytes_ > kWindowBytes;
    for (const auto& [id, s] : streams_) {
      short events = 0;
      if (s.credit > 0 && !s.local_eof && !link_backed_up) events |= POLLIN;
      if (!s.to_local.empty()) events |= POLLOUT;
      // A stream with nothing to wait for is left out: its hang-up alone would wake the loop.
      fds.push_back({events ? s.fd.get() : -1, events, 0});
      ids.push_back(id);
    }
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return std::unexpected(Error::Sys("poll the egress link"));
    }
    if (fds[0].revents) return {};
    // Posted work first: a refusal posted before its stream's end is seen closes it as a reset.
    if (fds[1].revents) RunPosted();
    bool closed = false;
    if (fds[2].revents & (POLLIN | POLLHUP | POLLERR)) SMOLBOX_TRY(ReadLink(closed));
    for (size_t i = 0; i < watches_.size(); ++i) {
      if (fds[3 + i].revents) watches_[i].second();
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      short revents = fds[first_stream + i].revents;
      auto it = streams_.find(ids[i]);
      if (revents == 0 || it == streams_.end()) continue;
      if (revents & POLLOUT) WriteLocal(ids[i], it->second);
      it = streams_.find(ids[i]);
      if (it != streams_.end() && (revents & (POLLIN | POLLHUP | POLLERR)) && it->second.credit > 0 &&
          !it->second.local_eof)
        ReadLocal(ids[i], it->second);
    }
    SMOLBOX_TRY(Flush());
    if (closed) return {};
  }
}

}  // namespace smolbox::egress_link
