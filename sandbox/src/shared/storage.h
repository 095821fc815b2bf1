// The sandbox's writable space: /tmp, the workdir, /dev/shm and every rw volume live in one
// filesystem, so one quota bounds all that the sandbox can write.
//
// As root it is an ext4 image on disk, so the quota can exceed the memory limit: the image file
// never has a name, and the mount exists only in the runtime's private mount namespace, so a
// killed runtime leaves neither behind. Each run's filesystem is new: a copy of an empty one that
// mkfs made once per size (cached under the state root) with a fresh UUID and hash seed. Rootless, the sandbox's
// setup mounts a size-capped tmpfs (which costs RAM) and hands the runtime a descriptor to it;
// for a VM a child of the runtime does (CreateDetachedTmpfs).
//
//   auto storage = Storage::CreateDisk(128, run_dir + "/storage");
//   storage->MakeLayout(sandbox_uid, sandbox_gid, volume_count);
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>

#include "copyback.h"
#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::shared {

class Storage {
 public:
  // Root only: an ext4 image of size_mib, loop-mounted at mountpoint (in a private mount
  // namespace: see EnterPrivateMountNamespace) until destroyed.
  static Expected<Storage> CreateDisk(int64_t size_mib, const std::string& mountpoint);
  // A tmpfs the sandbox's setup mounted, by a directory fd it sent us.
  static Storage Adopt(UniqueFd root);
  // Without root, for a sandbox whose setup mounts nothing (the vm backend's): a size-capped
  // tmpfs that a child mounts at mountpoint, in a user and mount namespace of its own, and hands
  // back as a descriptor to its root before it exits. The mount goes with its namespace, so no
  // path on the host ever leads there; the descriptor keeps the filesystem. With user_xattrs it
  // must hold user.* extended attributes (Linux 6.6 and later), as QEMU's mapped-xattr writes.
  static Expected<Storage> CreateDetachedTmpfs(int64_t size_mib, const std::string& mountpoint, bool user_xattrs);

  Storage(Storage&& other) noexcept
      : root_(std::move(other.root_)),
        mountpoint_(std::exchange(other.mountpoint_, {})),
        disk_backed_(other.disk_backed_),
        metadata_(other.metadata_) {}
  Storage& operator=(Storage&&) = delete;
  ~Storage();

  int root_fd() const { return root_.get(); }
  const std::string& mountpoint() const { return mountpoint_; }
  bool disk_backed() const { return disk_backed_; }
  // Creates tmp/, work/, shm/ and vol<N>/ for each rw volume, owned by the sandbox user.
  Expected<void> MakeLayout(uid_t uid, gid_t gid, size_t rw_volumes) const;
  // True when no block or no inode is left: the storage limit was reached.
  bool Full() const;

  static std::string VolumeDir(size_t index) { return "vol" + std::to_string(index); }

  // How entries record their type and mode: the vm backend's QEMU serves the storage with
  // mapped-xattr, and says so here so that the copy-back reads them from there.
  Metadata metadata() const { return metadata_; }
  void set_metadata(Metadata metadata) { metadata_ = metadata; }

 private:
  Storage(UniqueFd root, std::string mountpoint)
      : root_(std::move(root)), mountpoint_(std::move(mountpoint)), disk_backed_(!mountpoint_.empty()) {}
  UniqueFd root_;
  std::string mountpoint_;  // disk-backed only
  bool disk_backed_ = false;
  Metadata metadata_ = Metadata::kNative;
};

// Options for the rootless tmpfs, mounted by the sandbox's setup.
std::string TmpfsStorageOptions(int64_t size_mib, uid_t uid, gid_t gid);

}  // namespace smolbox::shared
