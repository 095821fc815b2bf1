#include "net.h"

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace smolbox::confine {

Expected<void> BringUpLoopback() {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::unexpected(Error::Sys("socket AF_INET for lo"));
  ifreq request{};
  std::strncpy(request.ifr_name, "lo", IFNAMSIZ - 1);
  request.ifr_flags = IFF_UP | IFF_RUNNING;
  int rc = ioctl(fd, SIOCSIFFLAGS, &request);
  int err = errno;
  close(fd);
  if (rc != 0) return std::unexpected(Error::Sys("ioctl SIOCSIFFLAGS lo up", err));
  return {};
}

}  // namespace smolbox::confine
