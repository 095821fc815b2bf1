// The sandbox's filesystem: a fresh root assembled from the image, the storage and the volumes,
// then pivot_root into it with the host's root detached.
//
// Runs inside the sandbox's new user and mount namespaces, before the agent starts. Host
// sources arrive as descriptors the runtime opened, so setup never resolves a host path with
// the sandbox's (unprivileged) ids.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "smolbox/error.h"

namespace smolbox::ns {

struct VolumeBind {
  std::string target;
  bool read_only = true;
  int source_fd = -1;       // ro: the host file or directory
  std::string storage_dir;  // rw: its copy in the storage
};

struct RootPlan {
  std::string newroot;    // an empty host directory to build on
  int image_fd = -1;      // a rootfs directory; -1 for the host image
  int storage_fd = -1;    // the sandbox's writable filesystem
  std::vector<VolumeBind> volumes;  // sorted so parents come before children
  std::string workdir;
  uid_t uid = 0;  // the workload's, for /etc/passwd
  gid_t gid = 0;
};

Expected<void> BuildRoot(const RootPlan& plan);
// pivot_root into newroot and detach the old root, so no host path is reachable.
Expected<void> PivotInto(const std::string& newroot);
// The directory every /proc/self/fd/N path for fd reaches, for mounting from a descriptor.
std::string FdPath(int fd);

}  // namespace smolbox::ns
