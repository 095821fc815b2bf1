#include "fd_passing.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace smolbox::shared {
namespace {

// One data buffer and room for the most descriptors; pointers into itself, so never copied.
struct FdMessage {
  FdMessage(void* data, size_t size) : iov{data, size} {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
  }
  FdMessage(const FdMessage&) = delete;
  FdMessage& operator=(const FdMessage&) = delete;

  iovec iov;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  msghdr msg{};
};

Expected<void> ReadExactly(int fd, char* data, size_t size) {
  for (size_t done = 0; done < size;) {
    ssize_t got = read(fd, data + done, size - done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return std::unexpected(Error::Sys("read a message with descriptors"));
    done += static_cast<size_t>(got);
  }
  return {};
}

}  // namespace

Expected<void> SendWithFds(int socket, const channel::Message& message, std::span<const int> fds) {
  if (fds.size() > kMaxPassedFds) return std::unexpected(Error{"sendmsg", "too many descriptors", 0});
  std::string frame = channel::Encode(message);
  FdMessage m(frame.data(), frame.size());
  if (fds.empty()) {
    m.msg.msg_control = nullptr;
    m.msg.msg_controllen = 0;
  } else {
    m.msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* cmsg = CMSG_FIRSTHDR(&m.msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
  }
  // The descriptors ride on the first bytes; the rest of a large frame follows as plain data.
  size_t sent = 0;
  while (sent < frame.size()) {
    ssize_t n = sent == 0 ? sendmsg(socket, &m.msg, MSG_NOSIGNAL)
                          : send(socket, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::unexpected(Error::Sys("sendmsg with descriptors"));
    sent += static_cast<size_t>(n);
  }
  return {};
}

ssize_t SendBytesWithFd(int socket, const void* data, size_t size, int fd) noexcept {
  iovec iov{const_cast<void*>(data), size};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cmsg), &fd, sizeof fd);
  }
  ssize_t n;
  do {
    n = sendmsg(socket, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n;
}

Expected<std::pair<channel::Message, std::vector<UniqueFd>>> ReceiveWithFds(int socket, uint32_t max_frame) {
  // The descriptors ride on the frame's first bytes: read the length prefix with recvmsg.
  char prefix[4];
  FdMessage m(prefix, sizeof prefix);
  ssize_t got = recvmsg(socket, &m.msg, MSG_WAITALL | MSG_CMSG_CLOEXEC);
  std::vector<UniqueFd> received;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m.msg); c; c = CMSG_NXTHDR(&m.msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      received.emplace_back(fd);
    }
  }
  if (got != sizeof prefix) return std::unexpected(Error{"recvmsg", "the peer went away", errno});
  // More than fit: the kernel dropped some, and the message cannot be taken as meant.
  if (m.msg.msg_flags & MSG_CTRUNC) return std::unexpected(Error{"recvmsg", "too many descriptors", 0});
  uint32_t body_len = 0;
  for (int i = 3; i >= 0; --i) body_len = (body_len << 8) | static_cast<unsigned char>(prefix[i]);
  if (body_len > max_frame) return std::unexpected(Error{"message", "frame too large", 0});
  // Exactly this frame: the next one belongs to whoever reads the socket after.
  std::string frame(prefix, sizeof prefix);
  frame.resize(sizeof prefix + body_len);
  SMOLBOX_TRY(ReadExactly(socket, frame.data() + sizeof prefix, body_len));
  channel::FrameReader reader;
  reader.Feed(frame.data(), frame.size());
  auto message = reader.Next();
  SMOLBOX_TRY(message);
  if (!*message) return std::unexpected(Error{"message", "an incomplete frame", 0});
  return std::pair{std::move(**message), std::move(received)};
}

}  // namespace smolbox::shared
