#include "client_watch.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "unique_fd.h"

namespace smolbox::api {
namespace {

// How often the connection is looked at while the work runs: a client that hangs up stops
// costing a sandbox within this.
constexpr int kClientCheckMs = 200;

}  // namespace

bool RunForClient(const std::function<void(int cancel_fd)>& work, const std::function<bool()>& connected,
                  int server_cancel_fd) {
  int fds[2] = {-1, -1};
  UniqueFd done(eventfd(0, EFD_CLOEXEC));
  if (!done.valid() || pipe2(fds, O_CLOEXEC) != 0) {
    // Without fds of its own the work is still cancelled by the server's shutdown.
    work(server_cancel_fd);
    return connected();
  }
  UniqueFd cancel_read(fds[0]), cancel_write(fds[1]);
  std::thread worker([&] {
    work(cancel_read.get());
    uint64_t one = 1;
    (void)!write(done.get(), &one, sizeof one);
  });
  bool gone = false;
  for (;;) {
    pollfd watched[2] = {{done.get(), POLLIN, 0}, {cancel_write.valid() ? server_cancel_fd : -1, POLLIN, 0}};
    int ready = poll(watched, 2, kClientCheckMs);
    if (ready < 0 && errno != EINTR) break;
    if (watched[0].revents != 0) break;
    if (!gone && !connected()) gone = true;
    // Closing the write end is what makes cancel_fd readable.
    if (gone || watched[1].revents != 0) cancel_write.Reset();
  }
  worker.join();
  return !gone;
}

}  // namespace smolbox::api
