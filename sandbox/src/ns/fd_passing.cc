#include "fd_passing.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace smolbox::ns {
namespace {

constexpr uint32_t kMaxSetupFrame = 1 << 20;

// One data buffer and room for one descriptor; pointers into itself, so never copied.
struct OneFdMessage {
  OneFdMessage(void* data, size_t size) : iov{data, size} {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
  }
  OneFdMessage(const OneFdMessage&) = delete;
  OneFdMessage& operator=(const OneFdMessage&) = delete;

  iovec iov;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
};

Expected<void> ReadExactly(int fd, char* data, size_t size) {
  for (size_t done = 0; done < size;) {
    ssize_t got = read(fd, data + done, size - done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return std::unexpected(Error::Sys("read setup message"));
    done += static_cast<size_t>(got);
  }
  return {};
}

}  // namespace

Expected<void> SendWithFd(int socket, const channel::Message& message, int fd) {
  std::string frame = channel::Encode(message);
  OneFdMessage m(frame.data(), frame.size());
  cmsghdr* cmsg = CMSG_FIRSTHDR(&m.msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
  if (sendmsg(socket, &m.msg, MSG_NOSIGNAL) != static_cast<ssize_t>(frame.size())) {
    return std::unexpected(Error::Sys("sendmsg with fd"));
  }
  return {};
}

Expected<std::pair<channel::Message, UniqueFd>> ReceiveWithFd(int socket) {
  // The descriptor rides on the frame's first bytes: read the length prefix with recvmsg.
  char prefix[4];
  OneFdMessage m(prefix, sizeof prefix);
  if (recvmsg(socket, &m.msg, MSG_WAITALL | MSG_CMSG_CLOEXEC) != sizeof prefix) {
    return std::unexpected(Error{"recvmsg", "the sandbox's setup went away", errno});
  }
  UniqueFd received;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m.msg); c; c = CMSG_NXTHDR(&m.msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    int fd = -1;
    std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
    received.Reset(fd);
  }
  uint32_t body_len = 0;
  for (int i = 3; i >= 0; --i) body_len = (body_len << 8) | static_cast<unsigned char>(prefix[i]);
  if (body_len > kMaxSetupFrame) return std::unexpected(Error{"setup message", "frame too large", 0});
  // Exactly this frame: the next one belongs to whoever reads the channel after setup.
  std::string frame(prefix, sizeof prefix);
  frame.resize(sizeof prefix + body_len);
  if (auto ok = ReadExactly(socket, frame.data() + sizeof prefix, body_len); !ok) return std::unexpected(ok.error());
  channel::FrameReader reader;
  reader.Feed(frame.data(), frame.size());
  auto message = reader.Next();
  if (!message) return std::unexpected(message.error());
  return std::pair{std::move(**message), std::move(received)};
}

}  // namespace smolbox::ns
