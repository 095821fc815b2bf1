#include "storage.h"

#include <fcntl.h>
#include <linux/loop.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include <fmt/format.h>

namespace smolbox::ns {
namespace {

// Disk, not /run: the image must not cost RAM.
constexpr const char* kImageDir = "/var/tmp";

// One inode per 8 KiB: many small files hit the quota about when their bytes would.
int64_t InodesFor(int64_t size_mib) { return std::max<int64_t>(1024, size_mib * 128); }

Expected<UniqueFd> CreateSparseImage(int64_t size_mib) {
  // O_TMPFILE: the image never has a name, so nothing is left on disk if we are killed.
  UniqueFd fd(open(kImageDir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) return std::unexpected(Error::Sys(fmt::format("open O_TMPFILE in {}", kImageDir)));
  if (ftruncate(fd.get(), size_mib << 20) != 0) return std::unexpected(Error::Sys("ftruncate storage image"));
  return fd;
}

Expected<void> Mkfs(int image_fd, int64_t size_mib) {
  // The image has no name: mkfs reaches it as its own fd 3 (dup2 clears close-on-exec).
  std::string device = "/proc/self/fd/3";
  std::string inodes = std::to_string(InodesFor(size_mib));
  // No journal and no reserved blocks: a scratch filesystem that lives for one run.
  const char* argv[] = {"mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-m", "0", "-N",
                        inodes.c_str(), "-E", "lazy_itable_init=1,nodiscard", device.c_str(),
                        nullptr};
  const char* envp[] = {"PATH=/usr/sbin:/sbin:/usr/bin:/bin", nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, image_fd, 3);
  // By absolute path: the caller's PATH (a user's, a test's) need not hold sbin.
  const char* mkfs = access("/usr/sbin/mkfs.ext4", X_OK) == 0 ? "/usr/sbin/mkfs.ext4" : "/sbin/mkfs.ext4";
  pid_t pid = 0;
  int rc = posix_spawn(&pid, mkfs, &actions, nullptr, const_cast<char**>(argv), const_cast<char**>(envp));
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return std::unexpected(Error::Sys("spawn mkfs.ext4 (install e2fsprogs)", rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return std::unexpected(Error{"mkfs.ext4", fmt::format("failed with status {}", status), 0});
  }
  return {};
}

// Attaches the image to a free loop device that detaches itself when unmounted.
Expected<UniqueFd> AttachLoop(int image_fd) {
  UniqueFd control(open("/dev/loop-control", O_RDWR | O_CLOEXEC));
  if (!control.valid()) return std::unexpected(Error::Sys("open /dev/loop-control"));
  for (int attempt = 0; attempt < 16; ++attempt) {
    int index = ioctl(control.get(), LOOP_CTL_GET_FREE);
    if (index < 0) return std::unexpected(Error::Sys("ioctl LOOP_CTL_GET_FREE"));
    UniqueFd loop(open(fmt::format("/dev/loop{}", index).c_str(), O_RDWR | O_CLOEXEC));
    if (!loop.valid()) return std::unexpected(Error::Sys(fmt::format("open /dev/loop{}", index)));
    loop_config config{};
    config.fd = static_cast<__u32>(image_fd);
    config.info.lo_flags = LO_FLAGS_AUTOCLEAR;
    if (ioctl(loop.get(), LOOP_CONFIGURE, &config) == 0) return loop;
    // Another runtime took this device between GET_FREE and CONFIGURE: try the next.
    if (errno != EBUSY) return std::unexpected(Error::Sys("ioctl LOOP_CONFIGURE"));
  }
  return std::unexpected(Error{"loop device", "every free device was taken concurrently", EBUSY});
}

}  // namespace

Expected<Storage> Storage::CreateDisk(int64_t size_mib, const std::string& mountpoint) {
  auto image = CreateSparseImage(size_mib);
  if (!image) return std::unexpected(image.error());
  if (auto ok = Mkfs(image->get(), size_mib); !ok) return std::unexpected(ok.error());
  auto loop = AttachLoop(image->get());
  if (!loop) return std::unexpected(loop.error());
  if (mkdir(mountpoint.c_str(), 0700) != 0) return std::unexpected(Error::Sys("mkdir " + mountpoint));
  std::string device = fmt::format("/proc/self/fd/{}", loop->get());
  if (mount(device.c_str(), mountpoint.c_str(), "ext4", MS_NOSUID | MS_NODEV, "") != 0) {
    rmdir(mountpoint.c_str());
    return std::unexpected(Error::Sys("mount ext4 storage on " + mountpoint));
  }
  Storage storage(UniqueFd(open(mountpoint.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC)), mountpoint);
  if (!storage.root_.valid()) return std::unexpected(Error::Sys("open storage root"));
  return storage;
}

Storage Storage::Adopt(UniqueFd root) { return Storage(std::move(root), ""); }

Storage::~Storage() {
  if (mountpoint_.empty()) return;
  // The loop device detaches itself once the last mount, the sandbox's included, is gone.
  root_.Reset();
  umount2(mountpoint_.c_str(), MNT_DETACH);
  rmdir(mountpoint_.c_str());
}

Expected<void> Storage::MakeLayout(uid_t uid, gid_t gid, size_t rw_volumes) const {
  std::vector<std::pair<std::string, mode_t>> dirs = {{"tmp", 01777}, {"work", 0755}, {"shm", 01777}};
  for (size_t i = 0; i < rw_volumes; ++i) dirs.emplace_back(VolumeDir(i), 0755);
  // ext4 leaves lost+found in the root; it is never mounted into the sandbox.
  if (fchown(root_.get(), uid, gid) != 0) return std::unexpected(Error::Sys("chown storage root"));
  for (const auto& [name, mode] : dirs) {
    if (mkdirat(root_.get(), name.c_str(), mode) != 0) return std::unexpected(Error::Sys("mkdir storage/" + name));
    if (fchownat(root_.get(), name.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) != 0) {
      return std::unexpected(Error::Sys("chown storage/" + name));
    }
    if (fchmodat(root_.get(), name.c_str(), mode, 0) != 0) return std::unexpected(Error::Sys("chmod storage/" + name));
  }
  return {};
}

bool Storage::Full() const {
  struct statvfs st{};
  if (fstatvfs(root_.get(), &st) != 0) return false;
  // A write that failed for lack of room leaves up to its own size free: count a filesystem
  // as full when less than a typical write (1 MiB) or 2% of it is left.
  uint64_t total = st.f_blocks * st.f_frsize;
  uint64_t left = st.f_bavail * st.f_frsize;
  return left < std::max<uint64_t>(1 << 20, total / 50) + (64 << 10) || st.f_favail == 0;
}

std::string TmpfsStorageOptions(int64_t size_mib, uid_t uid, gid_t gid) {
  return fmt::format("size={}m,nr_inodes={},mode=0755,uid={},gid={}", size_mib, InodesFor(size_mib), uid, gid);
}

}  // namespace smolbox::ns
