#include "storage.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "mutant.h"
#include "state.h"

namespace smolbox::shared {
namespace {

// Disk, not /run: the image must not cost RAM.
constexpr const char* kImageDir = "/var/tmp";

// The storage holds nothing that must outlive the run, so durability only costs time:
//   barrier=0: no cache flushes, which the loop device turns into fsyncs of the image; without
//     them the image's blocks stay in the page cache and are never allocated on the host disk
//     at all for a short run, so freeing the image needs no discards either.
//   noinit_itable, no_prefetch_block_bitmaps: no ext4lazyinit thread zeroing inode tables (a
//     copied image's are holes, which read as zeros) or reading bitmaps in the background.
constexpr const char* kMountOptions = "barrier=0,noinit_itable,no_prefetch_block_bitmaps";

// One inode per 8 KiB: many small files hit the quota about when their bytes would.
int64_t InodesFor(int64_t size_mib) { return std::max<int64_t>(1024, size_mib * 128); }

// The storage's size: the quota; with the quota off (mutant.h), more than any disk bomb of the
// battery writes.
int64_t SizeFor(int64_t quota_mib) {
  return SMOLBOX_PROTECTED("storage_quota") ? quota_mib : std::max<int64_t>(quota_mib, 1024);
}

// Where the ext4 superblock sits in the image, and the fields we check or renew in it
// (struct ext4_super_block in the kernel's fs/ext4/ext4.h).
constexpr off_t kSuperblockOffset = 1024;
constexpr size_t kSuperblockSize = 1024;
constexpr size_t kInodesCount = 0x0, kBlocksCountLo = 0x4, kLogBlockSize = 0x18, kMagic = 0x38,
                 kFeatureIncompat = 0x60, kFeatureRoCompat = 0x64, kUuid = 0x68, kHashSeed = 0xEC,
                 kBlocksCountHi = 0x150, kChecksum = 0x3FC;
constexpr uint32_t kIncompat64Bit = 0x80, kIncompatCsumSeed = 0x2000, kRoCompatMetadataCsum = 0x400;

uint32_t Le32(const uint8_t* p) { return p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24; }

void PutLe32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// CRC32C as ext4 uses it: seeded with ~0, stored without the final inversion.
uint32_t Crc32c(const uint8_t* data, size_t size) {
  uint32_t crc = ~0u;
  for (size_t i = 0; i < size; ++i) {
    crc ^= data[i];
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1)));
  }
  return crc;
}

// mkfs rounds the inode count it was asked for to whole inode-table blocks in every block
// group, up or down (41 MiB: 5248 asked, 5232 made; 65 MiB: 8320, 8352).
bool InodeCountFits(int64_t made, int64_t size_mib) {
  int64_t asked = InodesFor(size_mib);
  return made >= asked - asked / 16 && made <= asked + asked / 16;
}

// A superblock we made for this size: a template that fails this is rebuilt.
bool SuperblockFits(const uint8_t* sb, int64_t size_mib) {
  uint32_t incompat = Le32(sb + kFeatureIncompat), log_block = Le32(sb + kLogBlockSize);
  uint64_t blocks = Le32(sb + kBlocksCountLo);
  if (incompat & kIncompat64Bit) blocks |= static_cast<uint64_t>(Le32(sb + kBlocksCountHi)) << 32;
  // The checksum seed must be stored, not derived from the UUID, so that each copy can take a
  // fresh UUID without rewriting every checksum in the filesystem.
  return (sb[kMagic] | sb[kMagic + 1] << 8) == 0xEF53 && (incompat & kIncompatCsumSeed) &&
         (Le32(sb + kFeatureRoCompat) & kRoCompatMetadataCsum) && log_block <= 6 &&
         blocks > 0 && blocks << (10 + log_block) <= static_cast<uint64_t>(size_mib) << 20 &&
         InodeCountFits(Le32(sb + kInodesCount), size_mib) && Le32(sb + kChecksum) == Crc32c(sb, kChecksum);
}

// What mkfs would make unique: the UUID (statfs's f_fsid, visible in the sandbox) and the
// directory hash seed.
Expected<void> RenewIdentity(uint8_t* sb) {
  uint8_t fresh[32];
  if (getrandom(fresh, sizeof fresh, 0) != static_cast<ssize_t>(sizeof fresh)) {
    return std::unexpected(Error::Sys("getrandom for the storage's UUID"));
  }
  fresh[6] = (fresh[6] & 0x0f) | 0x40;  // a version 4, variant 1 UUID
  fresh[8] = (fresh[8] & 0x3f) | 0x80;
  memcpy(sb + kUuid, fresh, 16);
  memcpy(sb + kHashSeed, fresh + 16, 16);
  PutLe32(sb + kChecksum, Crc32c(sb, kChecksum));
  return {};
}

Expected<UniqueFd> CreateSparseImage(int64_t size_mib) {
  // O_TMPFILE: the image never has a name, so nothing is left on disk if we are killed.
  UniqueFd fd(open(kImageDir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) return std::unexpected(Error::Sys(fmt::format("open O_TMPFILE in {}", kImageDir)));
  if (ftruncate(fd.get(), size_mib << 20) != 0) return std::unexpected(Error::Sys("ftruncate storage image"));
  return fd;
}

// What a failed mkfs said on stderr, the last line of it, bounded.
std::string LastLineOf(int fd) {
  char text[1024];
  ssize_t n = pread(fd, text, sizeof text, 0);
  std::string said(text, n > 0 ? static_cast<size_t>(n) : 0);
  while (!said.empty() && (said.back() == '\n' || said.back() == ' ')) said.pop_back();
  return said.substr(said.rfind('\n') == std::string::npos ? 0 : said.rfind('\n') + 1);
}

Expected<void> Mkfs(int image_fd, int64_t size_mib) {
  // The image has no name: mkfs reaches it as its own fd 3 (dup2 clears close-on-exec).
  std::string device = "/proc/self/fd/3";
  std::string inodes = std::to_string(InodesFor(size_mib));
  // No journal and no reserved blocks: a scratch filesystem that lives for one run.
  const char* argv[] = {"mkfs.ext4", "-q", "-F", "-O", "^has_journal,metadata_csum_seed", "-m", "0",
                        "-N", inodes.c_str(), "-E", "lazy_itable_init=1,nodiscard", device.c_str(),
                        nullptr};
  const char* envp[] = {"PATH=/usr/sbin:/sbin:/usr/bin:/bin", nullptr};
  // Its complaints go into the error, not onto the user's terminal: a failed template is retried
  // quietly, and a failure that stands is reported once, in the result.
  UniqueFd said(memfd_create("mkfs-stderr", MFD_CLOEXEC));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, said.valid() ? said.get() : 1, 2);
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
    std::string how = WIFEXITED(status) ? fmt::format("exited with status {}", WEXITSTATUS(status))
                                        : fmt::format("was killed by signal {}", WTERMSIG(status));
    std::string why = said.valid() ? LastLineOf(said.get()) : "";
    return std::unexpected(Error{"mkfs.ext4", why.empty() ? how : fmt::format("{}: {}", how, why), 0});
  }
  return {};
}

// One template per --storage size in use, each up to a few MiB of metadata in /run: past this
// many sizes, the least recently used go.
constexpr size_t kMaxTemplates = 8;

std::string TemplatePath(const std::string& cache_dir, int64_t size_mib) {
  return fmt::format("{}/ext4-{}m-{}i.img", cache_dir, size_mib, InodesFor(size_mib));
}

// The template, if it is one we made: our own 0600 regular file (never through a symlink)
// of the right size whose superblock fits.
Expected<UniqueFd> OpenTemplate(const std::string& path, int64_t size_mib) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return std::unexpected(Error::Sys("open " + path));
  struct stat st{};
  uint8_t sb[kSuperblockSize];
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & 07777) != 0600 || st.st_nlink != 1 || st.st_size != size_mib << 20 ||
      pread(fd.get(), sb, sizeof sb, kSuperblockOffset) != static_cast<ssize_t>(sizeof sb) ||
      !SuperblockFits(sb, size_mib)) {
    return std::unexpected(Error{path, "not a storage template of this size; rebuilding it", 0});
  }
  return fd;
}

// Formats a template and puts it in place of whatever held its name.
Expected<UniqueFd> BuildTemplate(const std::string& path, int64_t size_mib) {
  std::string dir = path.substr(0, path.rfind('/'));
  UniqueFd fd(open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) return std::unexpected(Error::Sys("open O_TMPFILE in " + dir));
  if (ftruncate(fd.get(), size_mib << 20) != 0) return std::unexpected(Error::Sys("ftruncate storage template"));
  SMOLBOX_TRY(Mkfs(fd.get(), size_mib));
  // Named only once complete, and renamed into place: a reader sees no half-made template.
  std::string temp = fmt::format("{}.{}.new", path, getpid());
  unlink(temp.c_str());  // left by a killed runtime that had our pid
  if (linkat(fd.get(), "", AT_FDCWD, temp.c_str(), AT_EMPTY_PATH) != 0) {
    return std::unexpected(Error::Sys("link storage template " + temp));
  }
  if (rename(temp.c_str(), path.c_str()) != 0) {
    unlink(temp.c_str());
    return std::unexpected(Error::Sys("rename storage template to " + path));
  }
  return OpenTemplate(path, size_mib);
}

// Keeps the kMaxTemplates templates used last (a use renews a template's mtime) and removes
// the rest. A run still reading a removed one holds it open.
void PruneTemplates(const std::string& cache_dir) {
  DIR* dir = opendir(cache_dir.c_str());
  if (!dir) return;
  std::vector<std::pair<timespec, std::string>> templates;
  while (dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    struct stat st{};
    if (name.rfind("ext4-", 0) != 0 || !name.ends_with(".img") ||
        fstatat(dirfd(dir), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
      continue;
    }
    templates.emplace_back(st.st_mtim, name);
  }
  std::ranges::sort(templates, [](const auto& a, const auto& b) {
    return std::tie(a.first.tv_sec, a.first.tv_nsec) > std::tie(b.first.tv_sec, b.first.tv_nsec);
  });
  for (size_t i = kMaxTemplates; i < templates.size(); ++i) unlinkat(dirfd(dir), templates[i].second.c_str(), 0);
  closedir(dir);
}

// Writes the template's data, with a fresh identity, through the loop device: the writes
// land in the image's page cache after the loop device's setup, which fsyncs the image.
Expected<void> CopyTemplate(int from, int loop, int64_t size_mib) {
  std::vector<uint8_t> buffer(1 << 20);
  bool renewed = false;
  for (off_t pos = 0, end = size_mib << 20; pos < end;) {
    off_t data = lseek(from, pos, SEEK_DATA);
    if (data < 0 && errno == ENXIO) break;
    off_t hole = data < 0 ? -1 : lseek(from, data, SEEK_HOLE);
    if (hole < 0) return std::unexpected(Error::Sys("seek storage template"));
    for (off_t at = data; at < hole;) {
      ssize_t got = pread(from, buffer.data(), std::min<off_t>(buffer.size(), hole - at), at);
      if (got <= 0) return std::unexpected(Error::Sys("read storage template"));
      if (at <= kSuperblockOffset && kSuperblockOffset + static_cast<off_t>(kSuperblockSize) <= at + got) {
        uint8_t* sb = buffer.data() + (kSuperblockOffset - at);
        if (!SuperblockFits(sb, size_mib)) return std::unexpected(Error{"storage template", "changed while read", 0});
        SMOLBOX_TRY(RenewIdentity(sb));
        renewed = true;
      }
      if (pwrite(loop, buffer.data(), got, at) != got) return std::unexpected(Error::Sys("write storage image"));
      at += got;
    }
    pos = hole;
  }
  if (!renewed) return std::unexpected(Error{"storage template", "its superblock was not copied", 0});
  return {};
}

// A copy of the cached template for this size, formatted once per boot instead of per run.
Expected<void> FillFromTemplate(int loop, int64_t size_mib) {
  SMOLBOX_ASSIGN_OR_RETURN(auto cache, CacheDir());
  std::string path = TemplatePath(cache, size_mib);
  auto tmpl = OpenTemplate(path, size_mib);
  if (tmpl) {
    futimens(tmpl->get(), nullptr);  // used now: the last to be pruned
  } else {
    tmpl = BuildTemplate(path, size_mib);
    SMOLBOX_TRY(tmpl);
    PruneTemplates(cache);
  }
  return CopyTemplate(tmpl->get(), loop, size_mib);
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

enum class Format { kTemplate, kMkfs };

// A fresh image, formatted either way, loop-mounted at mountpoint.
Expected<UniqueFd> MountImage(int64_t size_mib, const std::string& mountpoint, Format format) {
  SMOLBOX_ASSIGN_OR_RETURN(auto image, CreateSparseImage(size_mib));
  if (format == Format::kMkfs) {
    SMOLBOX_TRY(Mkfs(image.get(), size_mib));
  }
  SMOLBOX_ASSIGN_OR_RETURN(auto loop, AttachLoop(image.get()));
  if (format == Format::kTemplate) {
    SMOLBOX_TRY(FillFromTemplate(loop.get(), size_mib));
  }
  std::string device = fmt::format("/proc/self/fd/{}", loop.get());
  if (mount(device.c_str(), mountpoint.c_str(), "ext4", MS_NOSUID | MS_NODEV, kMountOptions) != 0) {
    return std::unexpected(Error::Sys("mount ext4 storage on " + mountpoint));
  }
  UniqueFd root(open(mountpoint.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC));
  if (!root.valid()) {
    umount2(mountpoint.c_str(), MNT_DETACH);
    return std::unexpected(Error::Sys("open storage root"));
  }
  return root;
}

}  // namespace

Expected<Storage> Storage::CreateDisk(int64_t quota_mib, const std::string& mountpoint) {
  const int64_t size_mib = SizeFor(quota_mib);
  if (mkdir(mountpoint.c_str(), 0700) != 0) return std::unexpected(Error::Sys("mkdir " + mountpoint));
  auto root = MountImage(size_mib, mountpoint, Format::kTemplate);
  if (!root) {
    // The template is only a shortcut: whatever went wrong with it, mkfs makes the image.
    if (auto cache = CacheDir()) unlink(TemplatePath(*cache, size_mib).c_str());
    root = MountImage(size_mib, mountpoint, Format::kMkfs);
  }
  if (!root) {
    rmdir(mountpoint.c_str());
    return std::unexpected(root.error());
  }
  return Storage(std::move(*root), mountpoint);
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

std::string TmpfsStorageOptions(int64_t quota_mib, uid_t uid, gid_t gid) {
  const int64_t size_mib = SizeFor(quota_mib);
  return fmt::format("size={}m,nr_inodes={},mode=0755,uid={},gid={}", size_mib, InodesFor(size_mib), uid, gid);
}

}  // namespace smolbox::shared
