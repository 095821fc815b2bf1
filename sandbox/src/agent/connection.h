// The agent's end of the host channel. It is only an fd: a socketpair end (ns backend) and a
// virtio-serial port (vm backend) work alike.
//
//   Connection connection(UniqueFd(3));
//   connection.Send({{{"type", "ready"}}, ""});
//   // poll(connection.fd()) says readable:
//   connection.ReadAvailable();
//   while (auto message = connection.Next(); message && *message) Handle(**message);
#pragma once

#include <optional>

#include "channel.h"
#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::agent {

class Connection {
 public:
  explicit Connection(UniqueFd fd) : fd_(std::move(fd)) {}

  int fd() const { return fd_.get(); }
  // The host has gone: EOF, a read or write error, or a protocol error.
  bool closed() const { return closed_; }

  // Blocking write of one whole message; a failure closes the connection.
  Expected<void> Send(const channel::Message& message);
  // One read() into the frame buffer; call it when poll() says the fd is readable.
  Expected<void> ReadAvailable();
  // A complete buffered message, if there is one. Never reads.
  Expected<std::optional<channel::Message>> Next();

 private:
  UniqueFd fd_;
  channel::FrameReader reader_;
  bool closed_ = false;
};

}  // namespace smolbox::agent
