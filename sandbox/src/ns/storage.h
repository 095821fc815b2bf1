// The sandbox's writable space: /tmp, the workdir, /dev/shm and every rw volume live in one
// filesystem, so one quota bounds all that the sandbox can write.
//
// As root it is an ext4 image on disk, so the quota can exceed the memory limit: the image file
// is unlinked as soon as the loop device holds it, and the mount exists only in the runtime's
// private mount namespace, so a killed runtime leaves neither behind. Rootless, the sandbox's
// setup mounts a size-capped tmpfs (which costs RAM) and hands the runtime a descriptor to it.
//
//   auto storage = Storage::CreateDisk(128, run_dir + "/storage");
//   storage->MakeLayout(sandbox_uid, sandbox_gid, volume_count);
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::ns {

class Storage {
 public:
  // Root only: an ext4 image of size_mib, loop-mounted at mountpoint.
  static Expected<Storage> CreateDisk(int64_t size_mib, const std::string& mountpoint);
  // A tmpfs the sandbox's setup mounted, by a directory fd it sent us.
  static Storage Adopt(UniqueFd root);

  int root_fd() const { return root_.get(); }
  bool disk_backed() const { return disk_backed_; }
  // Creates tmp/, work/, shm/ and vol<N>/ for each rw volume, owned by the sandbox user.
  Expected<void> MakeLayout(uid_t uid, gid_t gid, size_t rw_volumes) const;
  // True when no block or no inode is left: the storage limit was reached.
  bool Full() const;

  static std::string VolumeDir(size_t index) { return "vol" + std::to_string(index); }

 private:
  Storage(UniqueFd root, bool disk_backed) : root_(std::move(root)), disk_backed_(disk_backed) {}
  UniqueFd root_;
  bool disk_backed_ = false;
};

// Options for the rootless tmpfs, mounted by the sandbox's setup.
std::string TmpfsStorageOptions(int64_t size_mib, uid_t uid, gid_t gid);

}  // namespace smolbox::ns
