#include "guest_restore.h"

#include <fcntl.h>
#include <linux/random.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "unique_fd.h"

namespace smolbox::agent {
namespace {

Expected<void> ReseedEntropy(const std::string& seed) {
  UniqueFd urandom(open("/dev/urandom", O_RDWR | O_CLOEXEC));
  if (!urandom.valid()) return std::unexpected(Error::Sys("open /dev/urandom"));
  std::vector<char> buffer(sizeof(rand_pool_info) + seed.size());
  auto* info = reinterpret_cast<rand_pool_info*>(buffer.data());
  info->entropy_count = static_cast<int>(seed.size() * 8);
  info->buf_size = static_cast<int>(seed.size());
  std::memcpy(info->buf, seed.data(), seed.size());
  // Credited: the seed comes from the host's getrandom(), as virtio-rng's bytes do.
  if (ioctl(urandom.get(), RNDADDENTROPY, info) != 0) return std::unexpected(Error::Sys("ioctl RNDADDENTROPY"));
  // Adding input alone leaves the CRNG on its old key until its next scheduled reseed (up to
  // a minute away, and on the snapshot's own clock): every restored VM would read the same
  // stream until then.
  return ReseedCrng();
}

}  // namespace

Expected<void> ReseedCrng() {
  UniqueFd urandom(open("/dev/urandom", O_RDONLY | O_CLOEXEC));
  if (!urandom.valid()) return std::unexpected(Error::Sys("open /dev/urandom"));
  if (ioctl(urandom.get(), RNDRESEEDCRNG) != 0) return std::unexpected(Error::Sys("ioctl RNDRESEEDCRNG"));
  return {};
}

Expected<void> FreshenRestoredGuest(const GuestRestore& restore) {
  SMOLBOX_TRY(ReseedEntropy(restore.seed));
  // The guest's clock stopped when the snapshot was taken; its wall clock would be that old.
  timespec now{static_cast<time_t>(restore.realtime_sec), static_cast<long>(restore.realtime_nsec)};
  if (clock_settime(CLOCK_REALTIME, &now) != 0) return std::unexpected(Error::Sys("clock_settime"));
  if (sethostname(restore.hostname.data(), restore.hostname.size()) != 0) {
    return std::unexpected(Error::Sys("sethostname"));
  }
  return {};
}

}  // namespace smolbox::agent
