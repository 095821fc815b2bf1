// A second way into a running sandbox: a listening unix socket the runtime made (ns backend,
// `--attach-fd`), for a container's `exec` while its main process runs (smolbox oci exec).
// Each connection gets an agent of its own: a fork of this one that closes everything of this
// one's, and serves that connection alone with the same protocol, one exec at a time. It is not
// PID 1, so it ends only its own workload's tree; PID 1 ends it with everything else when the
// sandbox's own exec ends.
//
//   AttachPoint attach(UniqueFd(4), [&](UniqueFd connection) { return ServeSide(...); });
//   // poll(attach.fd()) says readable:
//   attach.AcceptOne();
#pragma once

#include <functional>

#include "unique_fd.h"

namespace smolbox::agent {

class AttachPoint {
 public:
  // serve runs in the forked agent, with the connection as fd 3 and no other fd above 2 open;
  // its return value is that agent's exit status.
  using Serve = std::function<int(UniqueFd connection)>;

  AttachPoint(UniqueFd listener, Serve serve)
      : listener_(std::move(listener)), serve_(std::move(serve)) {}

  int fd() const { return listener_.get(); }
  // Takes one pending connection, if any, and forks its agent. Never blocks.
  void AcceptOne();

 private:
  UniqueFd listener_;
  Serve serve_;
};

}  // namespace smolbox::agent
