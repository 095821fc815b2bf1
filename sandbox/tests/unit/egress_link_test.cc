// The egress link's mux (egress_link.h) on a socketpair, as the host's and the guest's ends: the
// bytes of a stream both ways, the window a peer must keep to, and what a peer may not send.
#include "egress_link.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <optional>
#include <thread>

namespace smolbox::egress_link {
namespace {

std::pair<UniqueFd, UniqueFd> Pair() {
  int fds[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

void Blocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK); }

std::string Frame(nlohmann::json header, std::string tail = "") {
  return channel::Encode(channel::Message{std::move(header), std::move(tail)});
}

// Writes all of bytes; false when the reader stops taking them for five seconds, or is gone.
bool WriteAll(int fd, const std::string& bytes) {
  for (size_t done = 0; done < bytes.size();) {
    ssize_t n = send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      if (poll(&p, 1, 5000) != 1) return false;
      continue;
    }
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string ReadToEnd(int fd) {
  std::string all;
  char chunk[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) return all + "<timed out>";
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EAGAIN) continue;
    if (n < 0) return all + "<" + std::strerror(errno) + ">";
    if (n == 0) return all;
    all.append(chunk, static_cast<size_t>(n));
  }
}

// A mux on its own thread, stopped and joined at the end.
class Running {
 public:
  Running(int link, LinkMux::Hooks hooks)
      : mux_(link, std::move(hooks)), stop_(eventfd(0, EFD_CLOEXEC)) {
    ended_ = std::async(std::launch::async, [this] { return mux_.Run(stop_.get()); });
  }
  ~Running() { Stop(); }
  LinkMux& mux() { return mux_; }
  // How Run ended, within ten seconds; nullopt when it has not.
  std::optional<Expected<void>> Ended() {
    if (ended_.wait_for(std::chrono::seconds(10)) != std::future_status::ready) return std::nullopt;
    return ended_.get();
  }
  void Stop() {
    uint64_t one = 1;
    if (ended_.valid()) {
      EXPECT_EQ(write(stop_.get(), &one, sizeof one), 8);
      ended_.wait();
    }
  }

 private:
  LinkMux mux_;
  UniqueFd stop_;
  std::future<Expected<void>> ended_;
};

const SocketAddress kTo{IpAddress::V4(0xC000020A), 443};  // 192.0.2.10:443

TEST(EgressLink, relays_a_stream_both_ways_to_the_end_and_tells_the_host_where_it_goes) {
  auto [host_link, guest_link] = Pair();
  auto [app, app_mux_end] = Pair();
  auto [server, server_mux_end] = Pair();
  std::optional<SocketAddress> asked;
  Running host(host_link.get(), {.opened =
                                     [&, fd = std::make_shared<UniqueFd>(std::move(server_mux_end))](
                                         uint32_t, const SocketAddress& to) {
                                       asked = to;
                                       return std::move(*fd);
                                     },
                                 .query = nullptr,
                                 .reply = nullptr});
  Running guest(guest_link.get(), {});
  guest.mux().Post([&, fd = std::make_shared<UniqueFd>(std::move(app_mux_end))] {
    guest.mux().Open(std::move(*fd), kTo);
  });
  // Four windows each way: the credits must come back for it all to pass.
  std::string out(4 * kWindowBytes + 17, 'o'), in(4 * kWindowBytes + 5, 'i');
  for (size_t i = 0; i < out.size(); i += 4096) out[i] = static_cast<char>('a' + i % 26);
  bool all_out = false, all_in = false;
  std::thread writer([&] {
    all_out = WriteAll(app.get(), out);
    shutdown(app.get(), SHUT_WR);
  });
  std::string at_server;
  std::thread echo([&] {
    at_server = ReadToEnd(server.get());
    all_in = WriteAll(server.get(), in);
    shutdown(server.get(), SHUT_WR);
  });
  std::string at_app = ReadToEnd(app.get());
  writer.join();
  echo.join();
  EXPECT_TRUE(all_out && all_in);
  EXPECT_EQ(at_server.size(), out.size());
  EXPECT_TRUE(at_server == out);
  EXPECT_EQ(at_app.size(), in.size());
  EXPECT_TRUE(at_app == in);
  ASSERT_TRUE(asked.has_value());
  EXPECT_EQ(asked->ToString(), "192.0.2.10:443");
}

TEST(EgressLink, a_stream_the_host_refuses_is_reset_on_the_guest_side) {
  auto [host_link, guest_link] = Pair();
  // A real TCP connection on loopback, so that the reset shows as ECONNRESET.
  UniqueFd listener(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof address;
  ASSERT_EQ(bind(listener.get(), reinterpret_cast<sockaddr*>(&address), size), 0);
  ASSERT_EQ(listen(listener.get(), 1), 0);
  getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &size);
  UniqueFd app(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_EQ(connect(app.get(), reinterpret_cast<sockaddr*>(&address), size), 0);
  UniqueFd accepted(accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
  Running host(host_link.get(), {.opened = [](uint32_t, const SocketAddress&) { return UniqueFd(); },
                                 .query = nullptr,
                                 .reply = nullptr});
  Running guest(guest_link.get(), {});
  guest.mux().Post([&, fd = std::make_shared<UniqueFd>(std::move(accepted))] {
    guest.mux().Open(std::move(*fd), kTo);
  });
  char byte;
  pollfd p{app.get(), POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 10000), 1);
  EXPECT_EQ(read(app.get(), &byte, 1), -1);
  EXPECT_EQ(errno, ECONNRESET);
}

TEST(EgressLink, dns_queries_and_replies_cross_with_their_ids) {
  auto [host_link, guest_link] = Pair();
  std::promise<std::string> replied;
  Running* host_ptr = nullptr;
  Running host(host_link.get(), {.opened = nullptr,
                                 .query =
                                     [&](uint32_t id, std::string bytes) {
                                       host_ptr->mux().SendDns("dns_reply", id, "re:" + bytes);
                                     },
                                 .reply = nullptr});
  host_ptr = &host;
  Running guest(guest_link.get(),
                {.opened = nullptr, .query = nullptr, .reply = [&](uint32_t id, std::string bytes) {
                   replied.set_value(std::to_string(id) + " " + bytes);
                 }});
  guest.mux().Post([&] { guest.mux().SendDns("dns", 7, "question"); });
  auto answer = replied.get_future();
  ASSERT_EQ(answer.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(answer.get(), "7 re:question");
}

// The test plays a hostile guest: raw frames into the host's mux.
class HostilePeer : public ::testing::Test {
 protected:
  void SetUp() override {
    auto [host_link, peer] = Pair();
    host_link_ = std::move(host_link);
    peer_ = std::move(peer);
    Blocking(peer_.get());
  }
  LinkMux::Hooks Hooks() {
    return {.opened =
                [this](uint32_t, const SocketAddress&) {
                  auto [ours, theirs] = Pair();
                  // A local end that takes almost nothing: what the peer sends stays queued.
                  int small = 4096;
                  setsockopt(ours.get(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
                  kept_ = std::move(theirs);
                  return std::move(ours);
                },
            .query = nullptr,
            .reply = nullptr};
  }
  std::string EndedWith(Running& host) {
    auto ended = host.Ended();
    if (!ended) return "<still running>";
    return *ended ? "<ended cleanly>" : ended->error().ToString();
  }
  UniqueFd host_link_, peer_, kept_;
};

TEST_F(HostilePeer, data_past_the_window_ends_the_link) {
  Running host(host_link_.get(), Hooks());
  ASSERT_TRUE(WriteAll(peer_.get(), Frame({{"type", "open"}, {"stream", 1}, {"to", "192.0.2.10:80"}})));
  std::string chunk(kChunkBytes, 'x');
  // The host stops reading once the window is past: the writes may end early.
  for (size_t sent = 0; sent <= 2 * kWindowBytes; sent += chunk.size()) {
    if (!WriteAll(peer_.get(), Frame({{"type", "data"}, {"stream", 1}}, chunk))) break;
  }
  EXPECT_NE(EndedWith(host).find("data past the window"), std::string::npos) << EndedWith(host);
}

TEST_F(HostilePeer, a_credit_past_the_window_ends_the_link) {
  Running host(host_link_.get(), Hooks());
  EXPECT_TRUE(WriteAll(peer_.get(), Frame({{"type", "open"}, {"stream", 1}, {"to", "192.0.2.10:80"}})));
  EXPECT_TRUE(WriteAll(peer_.get(), Frame({{"type", "credit"}, {"stream", 1}, {"bytes", 1}})));
  EXPECT_NE(EndedWith(host).find("credit past the window"), std::string::npos);
}

TEST_F(HostilePeer, a_stream_opened_twice_or_a_bad_destination_ends_the_link) {
  {
    Running host(host_link_.get(), Hooks());
    auto open = Frame({{"type", "open"}, {"stream", 1}, {"to", "192.0.2.10:80"}});
    EXPECT_TRUE(WriteAll(peer_.get(), open + open));
    EXPECT_NE(EndedWith(host).find("opened twice"), std::string::npos);
  }
  SetUp();
  Running host(host_link_.get(), Hooks());
  EXPECT_TRUE(WriteAll(peer_.get(), Frame({{"type", "open"}, {"stream", 2}, {"to", "api.allowed.test:80"}})));
  EXPECT_NE(EndedWith(host).find("open frame's to"), std::string::npos) << EndedWith(host);
}

TEST_F(HostilePeer, frames_of_the_wrong_side_or_shape_end_the_link) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {Frame({{"type", "dns_reply"}, {"query", 1}}, "x"), "unexpected frame \"dns_reply\""},
      {Frame({{"type", "data"}, {"stream", -1}}), "stream"},
      {Frame({{"type", "open"}, {"stream", 1}}), "to"},
      {std::string("\x08\x00\x00\x00\x04\x00\x00\x00nope", 12), "egress link frame"},
  };
  for (const auto& [frame, named] : cases) {
    SetUp();
    Running host(host_link_.get(), Hooks());
    EXPECT_TRUE(WriteAll(peer_.get(), frame));
    std::string ended = EndedWith(host);
    EXPECT_NE(ended.find(named), std::string::npos) << named << ": " << ended;
  }
}

TEST_F(HostilePeer, frames_for_a_stream_that_is_gone_are_passed_over) {
  Running host(host_link_.get(), Hooks());
  EXPECT_TRUE(WriteAll(peer_.get(), Frame({{"type", "data"}, {"stream", 9}}, "late") +
                                        Frame({{"type", "eof"}, {"stream", 9}}) +
                                        Frame({{"type", "reset"}, {"stream", 9}})));
  close(peer_.Release());
  EXPECT_EQ(EndedWith(host), "<ended cleanly>");
}

}  // namespace
}  // namespace smolbox::egress_link
