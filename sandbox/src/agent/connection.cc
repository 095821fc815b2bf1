#include "connection.h"

#include <unistd.h>

#include <array>

namespace smolbox::agent {

Expected<void> Connection::Send(const channel::Message& message) {
  if (closed_) return std::unexpected(Error{"channel write", "the host has gone", 0});
  auto sent = channel::WriteMessage(fd_.get(), message);
  if (!sent) closed_ = true;
  return sent;
}

Expected<void> Connection::ReadAvailable() {
  if (closed_) return {};
  std::array<char, 64 * 1024> chunk;
  ssize_t n = read(fd_.get(), chunk.data(), chunk.size());
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return {};
  if (n <= 0) {
    closed_ = true;
    if (n < 0) return std::unexpected(Error::Sys("channel read"));
    return {};
  }
  reader_.Feed(chunk.data(), static_cast<size_t>(n));
  return {};
}

Expected<std::optional<channel::Message>> Connection::Next() {
  auto message = reader_.Next();
  // A malformed frame leaves the stream unsynchronised: nothing after it can be trusted.
  if (!message) closed_ = true;
  return message;
}

}  // namespace smolbox::agent
