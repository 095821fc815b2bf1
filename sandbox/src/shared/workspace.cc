#include "workspace.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "copyback.h"
#include "mutant.h"

namespace smolbox::shared {
namespace {

// path beneath root: never through a symlink, a magic link or another mount, whatever the
// directory's owner has planted there.
int OpenBeneath(int root, const std::string& path, int flags) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags);
  how.resolve = SMOLBOX_PROTECTED("volume_root")
                    ? RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV
                    : 0;
  return static_cast<int>(syscall(SYS_openat2, root, path.c_str(), &how, sizeof how));
}

size_t RwCount(const std::vector<HostVolume>& volumes) {
  size_t n = 0;
  for (const auto& v : volumes) n += v.mount->read_only ? 0 : 1;
  return n;
}

}  // namespace

Expected<void> EnterPrivateMountNamespace() {
  static bool entered = false;
  if (entered) return {};
  if (unshare(CLONE_NEWNS) != 0) return std::unexpected(Error::Sys("unshare CLONE_NEWNS"));
  // Slave: host mounts still appear here, nothing of ours goes back.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) {
    return std::unexpected(Error::Sys("mount --make-rslave /"));
  }
  entered = true;
  return {};
}

Expected<std::vector<HostVolume>> OpenVolumes(const SandboxSpec& spec) {
  UniqueFd root;
  if (!spec.volume_root.empty()) {
    root.Reset(open(spec.volume_root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root.valid()) return std::unexpected(Error{"volume_root", spec.volume_root, errno});
  }
  std::vector<HostVolume> volumes;
  size_t rw = 0;
  for (size_t i = 0; i < spec.mounts.size(); ++i) {
    const Mount& m = spec.mounts[i];
    if (m.scratch) {
      volumes.push_back(HostVolume{&m, UniqueFd(), rw++});
      continue;
    }
    int flags = m.read_only ? O_PATH | O_CLOEXEC : O_RDONLY | O_DIRECTORY | O_CLOEXEC;
    UniqueFd fd(root.valid() ? OpenBeneath(root.get(), m.source, flags) : open(m.source.c_str(), flags));
    if (!fd.valid()) {
      std::string why = !m.read_only && errno == ENOTDIR ? "a rw volume must be a directory"
                        : root.valid() && errno == ELOOP ? "a symlink on the way, which a volume root never follows"
                        : root.valid() && errno == EXDEV ? "not beneath the volume root"
                                                         : strerror(errno);
      return std::unexpected(Error{fmt::format("mounts[{}].source", i), fmt::format("{}: {}", m.source, why), 0});
    }
    volumes.push_back(HostVolume{&m, std::move(fd), m.read_only ? 0 : rw++});
  }
  return volumes;
}

Expected<void> FillStorage(const SandboxSpec& spec, const std::vector<HostVolume>& volumes,
                           const Storage& storage, uid_t owner_uid, gid_t owner_gid, RunResult& result) {
  SMOLBOX_TRY(storage.MakeLayout(owner_uid, owner_gid, RwCount(volumes)));
  int64_t budget = spec.limits.storage_mib << 20;
  for (size_t i = 0; i < volumes.size(); ++i) {
    const HostVolume& v = volumes[i];
    if (v.mount->read_only || v.mount->scratch) continue;  // a scratch directory starts empty
    std::string name = Storage::VolumeDir(v.storage_index);
    UniqueFd to(openat(storage.root_fd(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    std::vector<std::string> dropped;
    auto ok = CopyIn(v.fd.get(), to.get(), Owner{owner_uid, owner_gid}, &budget, &dropped);
    if (!ok) return std::unexpected(Error{fmt::format("mounts[{}]", i), ok.error().ToString(), 0});
    for (const auto& d : dropped) result.Warn(fmt::format("mounts[{}]: {} into the sandbox", i, d));
  }
  return {};
}

void CopyBackVolumes(const SandboxSpec& spec, const std::vector<HostVolume>& volumes, const Storage& storage,
                     RunResult& result) {
  for (size_t i = 0; i < volumes.size(); ++i) {
    const HostVolume& v = volumes[i];
    if (v.mount->read_only || v.mount->scratch) continue;  // a scratch directory has no host side
    std::string name = Storage::VolumeDir(v.storage_index);
    UniqueFd from(openat(storage.root_fd(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat host{};
    fstat(v.fd.get(), &host);
    std::vector<std::string> dropped;
    auto ok = from.valid() ? CopyBack(from.get(), v.fd.get(), Owner{host.st_uid, host.st_gid},
                                      spec.limits.storage_mib << 20, &dropped, storage.metadata())
                           : std::unexpected(Error{"storage", "the volume's copy is gone", 0});
    for (const auto& d : dropped) result.Warn(fmt::format("mounts[{}]: {} back to the host", i, d));
    if (!ok) result.Warn(fmt::format("mounts[{}]: copy-back stopped: {}", i, ok.error().ToString()));
  }
}

Expected<UniqueFd> OpenStdinFile(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid()) return std::unexpected(Error{"stdin_file", path + ": " + strerror(errno), 0});
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return std::unexpected(Error::Sys("fstat " + path));
  if (S_ISDIR(st.st_mode)) return std::unexpected(Error{"stdin_file", path + " is a directory", 0});
  return fd;
}

}  // namespace smolbox::shared
