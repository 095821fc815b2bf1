#include "attach_point.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

namespace smolbox::agent {
namespace {

constexpr int kSideChannelFd = 3;

// In the forked agent: only the connection stays, as fd 3. The parent's channel (fd 3 too),
// the listener, its signalfd and a running exec's pipes all close, so that none of them is held
// open on the parent's behalf: a pipe kept open here would keep its workload from ever seeing
// EOF on stdin.
bool KeepOnlyConnection(int connection) {
  if (connection != kSideChannelFd && dup2(connection, kSideChannelFd) < 0) return false;
  if (syscall(SYS_close_range, kSideChannelFd + 1, ~0U, 0) != 0) return false;
  return fcntl(kSideChannelFd, F_SETFD, FD_CLOEXEC) == 0;
}

}  // namespace

void AttachPoint::AcceptOne() {
  int connection = accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (connection < 0) return;  // EAGAIN: another pass took it, or it went away
  // The agent's reads and writes on its channel block: only poll says when to read.
  int flags = fcntl(connection, F_GETFL);
  if (flags < 0 || fcntl(connection, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    close(connection);
    return;
  }
  pid_t pid = fork();
  if (pid == 0) {
    // Orphans of its workload come back to it, not to PID 1, so it reaps its own tree.
    if (!KeepOnlyConnection(connection) || prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) _exit(1);
    _exit(serve_(UniqueFd(kSideChannelFd)));
  }
  if (pid < 0)
    fmt::print(stderr, "smolbox-agent: fork an agent for an attached exec: {}\n",
               std::strerror(errno));
  close(connection);
}

}  // namespace smolbox::agent
