// rw volumes: the workload never writes a host directory. Before the run the directory is
// copied into the sandbox's storage; after the run, whatever its status, the changes are copied
// back. Only regular files and directories cross, without setuid, setgid or sticky bits;
// symlinks, hardlinks, devices, FIFOs and sockets are dropped and reported.
//
// Both walks hold directories by descriptor and open every entry with O_NOFOLLOW, so a symlink
// the sandbox planted, in place of a file or of a directory, is never followed.
//
// Copy-back loses only what it must: an entry over a limit (a file over the quota, a directory
// nested deeper than 256 levels) or one that fails to copy is skipped and listed by path, and
// everything else still crosses. Copy-in fails whole instead, since a sandbox started on part
// of its input would mirror the missing part back as deletions.
//
//   std::vector<std::string> dropped;
//   CopyIn(host_fd, storage_fd, {.uid = 2000001000, .gid = 2000001000}, &budget, &dropped);
//   ... run ...
//   CopyBack(storage_fd, host_fd, {.uid = 0, .gid = 0}, quota_bytes, &dropped);
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "smolbox/error.h"

namespace smolbox::shared {

struct Owner {
  uid_t uid = 0;
  gid_t gid = 0;
};

// How the sandbox's side records what an entry is. The vm's storage is served by QEMU with
// security_model=mapped-xattr: there every entry is a regular file or a directory on the host,
// and the type and mode the guest gave it are in its user.virtfs.mode xattr. The copy-back
// takes them from there, so a guest's symlink or FIFO is dropped like one, never copied as the
// regular file that holds it.
enum class Metadata { kNative, kMappedXattr };

// Copies the tree at from_dir into the empty to_dir, owned by `owner`, spending *budget bytes;
// a tree larger than the budget is an error.
Expected<void> CopyIn(int from_dir, int to_dir, Owner owner, int64_t* budget,
                      std::vector<std::string>* dropped);
// Makes host_dir match sandbox_dir: new and changed files are written (through a temporary
// file and rename), entries the sandbox deleted are removed. New entries are owned by `owner`.
// At most `budget` bytes are written: a sparse file cannot inflate past the storage quota.
Expected<void> CopyBack(int sandbox_dir, int host_dir, Owner owner, int64_t budget,
                        std::vector<std::string>* dropped, Metadata metadata = Metadata::kNative);

}  // namespace smolbox::shared
