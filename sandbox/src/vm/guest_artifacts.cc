#include "guest_artifacts.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include <fmt/format.h>

namespace smolbox::vm {
namespace {

Expected<UniqueFd> OpenArtifact(const std::string& dir, const char* name) {
  std::string path = fmt::format("{}/{}", dir, name);
  // QEMU reopens it through /proc/self/fd as its own unprivileged uid.
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  struct stat st{};
  if (!fd.valid() || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
    return std::unexpected(Error{"guest artifacts",
                                 fmt::format("{} is missing or empty; build the guest with: scripts/build-guest --out {}", path, dir),
                                 0});
  }
  if ((st.st_mode & S_IROTH) == 0) {
    return std::unexpected(Error{"guest artifacts", fmt::format("{} must be world-readable (mode 0644): QEMU runs as an unprivileged uid", path), 0});
  }
  return fd;
}

}  // namespace

Expected<GuestArtifacts> OpenGuestArtifacts(const std::string& dir) {
  GuestArtifacts guest;
  guest.dir = dir;
  for (auto [fd, name] : {std::pair{&guest.kernel, "vmlinux"}, {&guest.initramfs, "initramfs.cpio"},
                          {&guest.rootfs, "rootfs.erofs"}}) {
    SMOLBOX_ASSIGN_OR_RETURN(auto opened, OpenArtifact(dir, name));
    *fd = std::move(opened);
  }
  return guest;
}

}  // namespace smolbox::vm
