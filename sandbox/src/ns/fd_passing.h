// A channel message with a descriptor attached (SCM_RIGHTS), for the rootless storage hand-off.
#pragma once

#include <utility>

#include "channel.h"
#include "unique_fd.h"

namespace smolbox::ns {

Expected<void> SendWithFd(int socket, const channel::Message& message, int fd);
// Reads exactly one frame, and the descriptor that came with it if any.
Expected<std::pair<channel::Message, UniqueFd>> ReceiveWithFd(int socket);

}  // namespace smolbox::ns
