#include "snapshot.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <regex>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cache_files.h"
#include "state.h"

namespace smolbox::vm {
namespace {

// Bump when what the guest holds at the snapshot point changes in a way the key cannot see.
constexpr int kSnapshotFormat = 1;
constexpr size_t kHeaderBytes = 4096;
constexpr const char* kHeaderMagic = "smolbox vm snapshot\n";
// QEMU_VM_FILE_MAGIC, the first bytes of a migration stream.
constexpr char kQemuMagic[4] = {'Q', 'E', 'V', 'M'};
constexpr const char* kSuffix = ".vmstate";
constexpr const char* kTempPrefix = ".tmp-";
// A temp file this old belongs to a run that died while saving.
constexpr auto kStaleTemp = std::chrono::minutes(10);
constexpr int kPollMigrateMs = 20;

uint64_t Fnv1a(const std::string& text, uint64_t hash) {
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::string Hash128(const std::string& text) {
  return fmt::format("{:016x}{:016x}", Fnv1a(text, 0xcbf29ce484222325ULL), Fnv1a(text, 0x84222325cbf29ce4ULL));
}

// The command line without what differs between two runs of one machine: descriptor numbers
// and the TSC frequency the host reports at this moment (the guest keeps the one it booted with).
std::string NormalizedArgv(const Qemu& qemu, VmConfig config) {
  config.qmp_fd = -1;
  config.incoming_fd = -1;
  config.tsc_khz = 0;
  static const std::regex kFdPath(R"(/proc/self/fd/\d+)");
  static const std::regex kFdOption(R"(fd=\d+)");
  std::string line;
  for (const auto& arg : QemuArgv(qemu, config)) {
    line += std::regex_replace(std::regex_replace(arg, kFdPath, "/proc/self/fd/N"), kFdOption, "fd=N") + " ";
  }
  return line;
}

std::string Header(const SnapshotKey& key) {
  std::string header = kHeaderMagic + key.text;
  header.resize(kHeaderBytes, '\0');
  return header;
}

Expected<void> WriteAll(int fd, std::string_view data) {
  for (size_t done = 0; done < data.size();) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::unexpected(Error::Sys("write the snapshot"));
    done += static_cast<size_t>(n);
  }
  return {};
}

bool SameFile(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

}  // namespace

Expected<SnapshotKey> MakeSnapshotKey(const Qemu& qemu, const GuestArtifacts& guest, const VmConfig& config) {
  UniqueFd binary(open(qemu.path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!binary.valid()) return std::unexpected(Error::Sys("open " + qemu.path));
  std::string manifest = ReadSmallFile(guest.dir + "/manifest.json");
  SnapshotKey key;
  key.text = fmt::format(
      "format={}\nqemu={} {}.{} {}\nvmlinux={}\ninitramfs.cpio={}\nrootfs.erofs={}\nmanifest.json={}\nargv={}\n",
      kSnapshotFormat, qemu.path, qemu.major, qemu.minor, FileIdentity(binary.get()), FileIdentity(guest.kernel.get()),
      FileIdentity(guest.initramfs.get()), FileIdentity(guest.rootfs.get()),
      manifest.empty() ? "none" : Hash128(manifest), NormalizedArgv(qemu, config));
  if (key.text.size() + strlen(kHeaderMagic) >= kHeaderBytes) {
    return std::unexpected(Error{"boot snapshot", "its key does not fit its header", 0});
  }
  key.name = Hash128(key.text) + kSuffix;
  return key;
}

Expected<SnapshotStore> SnapshotStore::Open() {
  SMOLBOX_ASSIGN_OR_RETURN(auto root, shared::StateRoot());
  std::string path = root + "/snapshots";
  if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return std::unexpected(Error::Sys("mkdir " + path));
  UniqueFd dir(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir.valid()) return std::unexpected(Error::Sys("open " + path));
  struct stat st{};
  if (fstat(dir.get(), &st) != 0) return std::unexpected(Error::Sys("stat " + path));
  if (st.st_uid != geteuid()) return std::unexpected(Error{"boot snapshot", path + " is not ours", EPERM});
  // Snapshots hold a booted kernel's memory: no one else reads them.
  if ((st.st_mode & 07777) != 0700 && fchmod(dir.get(), 0700) != 0) return std::unexpected(Error::Sys("chmod " + path));
  return SnapshotStore(std::move(path), std::move(dir));
}

Expected<std::optional<UniqueFd>> SnapshotStore::OpenForRestore(const SnapshotKey& key) {
  UniqueFd fd(openat(dir_.get(), key.name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid() && errno == ENOENT) return std::optional<UniqueFd>();
  if (!fd.valid()) return std::unexpected(Error::Sys("open " + PathOf(key)));
  auto bad = [&](const std::string& why) { return std::unexpected(Error{"boot snapshot " + PathOf(key), why, 0}); };
  struct stat st{};
  if (fstat(fd.get(), &st) != 0) return std::unexpected(Error::Sys("stat " + PathOf(key)));
  if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1 || (st.st_mode & 077) != 0) {
    return bad("is not a private regular file of ours");
  }
  std::string header(kHeaderBytes, '\0');
  if (read(fd.get(), header.data(), header.size()) != static_cast<ssize_t>(header.size())) return bad("is truncated");
  if (header != Header(key)) return bad("has a header of another configuration, or garbage");
  char magic[sizeof kQemuMagic];
  if (pread(fd.get(), magic, sizeof magic, kHeaderBytes) != sizeof magic || memcmp(magic, kQemuMagic, sizeof magic) != 0) {
    return bad("holds no QEMU migration stream");
  }
  return std::optional<UniqueFd>(std::move(fd));
}

void SnapshotStore::Touch(int fd) { futimens(fd, nullptr); }

void SnapshotStore::Discard(const SnapshotKey& key, int fd) {
  struct stat held{}, named{};
  if (fstat(fd, &held) != 0 || fstatat(dir_.get(), key.name.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0) return;
  if (SameFile(held, named)) unlinkat(dir_.get(), key.name.c_str(), 0);
}

Expected<PendingSnapshot> SnapshotStore::Begin(const SnapshotKey& key) {
  PendingSnapshot pending;
  pending.name = key.name;
  // Unique among runtimes (pid) and among the sessions one runtime starts at once (counter).
  static std::atomic<unsigned> counter{0};
  pending.temp_name = fmt::format("{}{}-{}-{}", kTempPrefix, getpid(), counter++, key.name);
  pending.fd.Reset(openat(dir_.get(), pending.temp_name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!pending.fd.valid()) return std::unexpected(Error::Sys(fmt::format("create {}/{}", path_, pending.temp_name)));
  if (auto ok = WriteAll(pending.fd.get(), Header(key)); !ok) {
    Abandon(pending);
    return std::unexpected(ok.error());
  }
  return pending;
}

Expected<void> SnapshotStore::Commit(PendingSnapshot& pending) {
  struct stat st{};
  if (fstat(pending.fd.get(), &st) != 0 || st.st_size <= static_cast<off_t>(kHeaderBytes)) {
    Abandon(pending);
    return std::unexpected(Error{"boot snapshot", "QEMU wrote nothing", 0});
  }
  if (renameat(dir_.get(), pending.temp_name.c_str(), dir_.get(), pending.name.c_str()) != 0) {
    Error error = Error::Sys(fmt::format("rename {}/{}", path_, pending.temp_name));
    Abandon(pending);
    return std::unexpected(error);
  }
  pending.temp_name.clear();
  pending.fd.Reset();
  Prune();
  return {};
}

void SnapshotStore::Abandon(PendingSnapshot& pending) {
  if (!pending.temp_name.empty()) unlinkat(dir_.get(), pending.temp_name.c_str(), 0);
  pending.temp_name.clear();
  pending.fd.Reset();
}

void SnapshotStore::Prune() {
  UniqueFd listing(openat(dir_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  DIR* dir = listing.valid() ? fdopendir(listing.get()) : nullptr;
  if (dir == nullptr) return;
  listing.Release();
  std::vector<std::pair<timespec, std::string>> snapshots;
  auto now = std::chrono::system_clock::now();
  while (dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    struct stat st{};
    if (fstatat(dir_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    if (name.starts_with(kTempPrefix)) {
      auto age = now - std::chrono::system_clock::from_time_t(st.st_mtim.tv_sec);
      if (age > kStaleTemp) unlinkat(dir_.get(), name.c_str(), 0);
    } else if (name.ends_with(kSuffix)) {
      snapshots.emplace_back(st.st_mtim, name);
    }
  }
  closedir(dir);
  if (snapshots.size() <= kKeptSnapshots) return;
  std::sort(snapshots.begin(), snapshots.end(), [](const auto& a, const auto& b) {
    return a.first.tv_sec != b.first.tv_sec ? a.first.tv_sec < b.first.tv_sec : a.first.tv_nsec < b.first.tv_nsec;
  });
  for (size_t i = 0; i + kKeptSnapshots < snapshots.size(); ++i) unlinkat(dir_.get(), snapshots[i].second.c_str(), 0);
}

namespace {

// Copies QEMU's stream into file until QEMU closes its end, which it does when the migration
// ends, either way.
Expected<void> Drain(int stream, int file, std::chrono::steady_clock::time_point deadline) {
  std::vector<char> buffer(1 << 20);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    pollfd fd{stream, POLLIN, 0};
    int ready = poll(&fd, 1, static_cast<int>(std::max<int64_t>(left, 0)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return std::unexpected(Error::Sys("poll the migration stream"));
    if (ready == 0) return std::unexpected(Error{"boot snapshot", "QEMU's migration stream did not end in time", ETIMEDOUT});
    ssize_t n = read(stream, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::unexpected(Error::Sys("read the migration stream"));
    if (n == 0) return {};
    SMOLBOX_TRY(WriteAll(file, std::string_view(buffer.data(), static_cast<size_t>(n))));
  }
}

}  // namespace

Expected<void> SaveVm(Qmp& qmp, int file, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  // QEMU gets a socket, not the file: a QEMU that a later workload took over must hold nothing
  // that writes the snapshot other VMs restore.
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return std::unexpected(Error::Sys("socketpair"));
  UniqueFd stream(pair[0]), qemu_end(pair[1]);
  SMOLBOX_TRY(qmp.Execute("getfd", {{"fdname", "snapshot"}}, timeout_ms, qemu_end.get()));
  qemu_end.Reset();
  // QEMU throttles migration to 128 MiB/s by default; a local copy takes all it can get.
  if (auto ok = qmp.Execute("migrate-set-parameters", {{"max-bandwidth", int64_t{1} << 40}}, timeout_ms); !ok) {
    return std::unexpected(ok.error());
  }
  SMOLBOX_TRY(qmp.Execute("stop", nullptr, timeout_ms));
  SMOLBOX_TRY(qmp.Execute("migrate", {{"uri", "fd:snapshot"}}, timeout_ms));
  SMOLBOX_TRY(Drain(stream.get(), file, deadline));
  for (;;) {
    SMOLBOX_ASSIGN_OR_RETURN(auto info, qmp.Execute("query-migrate", nullptr, timeout_ms));
    std::string status = info.value("status", "");
    if (status == "completed") return {};
    if (status == "failed" || status == "cancelled") {
      return std::unexpected(Error{"qmp: migrate", info.value("error-desc", status), 0});
    }
    if (std::chrono::steady_clock::now() > deadline) return std::unexpected(Error{"qmp: migrate", "did not complete in time", ETIMEDOUT});
    std::this_thread::sleep_for(std::chrono::milliseconds(kPollMigrateMs));
  }
}

Expected<void> ResumeVm(Qmp& qmp, int timeout_ms) {
  SMOLBOX_TRY(qmp.Execute("cont", nullptr, timeout_ms));
  return {};
}

}  // namespace smolbox::vm
