// A channel message with descriptors attached (SCM_RIGHTS): the rootless storage hand-off, and
// an exec's stdio passed to a persistent sandbox's keeper.
#pragma once

#include <sys/types.h>

#include <span>
#include <utility>
#include <vector>

#include "channel.h"
#include "unique_fd.h"

namespace smolbox::shared {

// The most descriptors one message carries.
inline constexpr size_t kMaxPassedFds = 3;

Expected<void> SendWithFds(int socket, const channel::Message& message, std::span<const int> fds);
// Reads exactly one frame of at most max_frame bytes, and the descriptors that came with it.
Expected<std::pair<channel::Message, std::vector<UniqueFd>>> ReceiveWithFds(int socket, uint32_t max_frame);

// One sendmsg of size bytes with fd attached (none when fd < 0): for a fixed-size report or a
// line that fits one call. Allocates nothing, so a forked child may use it. Returns what
// sendmsg returns, retried on EINTR.
ssize_t SendBytesWithFd(int socket, const void* data, size_t size, int fd) noexcept;

inline Expected<void> SendWithFd(int socket, const channel::Message& message, int fd) {
  return SendWithFds(socket, message, std::span<const int>(&fd, 1));
}

}  // namespace smolbox::shared
