// The sandbox's filesystem: a fresh root assembled from the image, the storage and the volumes,
// then pivot_root into it with the host's root detached.
//
// Runs inside the sandbox's new user and mount namespaces, before the agent starts. Host
// sources are opened first, while the setup still has the runtime's filesystem ids, and are
// mounted later through their descriptors. (A bind source must belong to the caller's own mount
// namespace, so the runtime cannot open them for us.)
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "smolbox/error.h"

namespace smolbox::confine {

struct VolumeBind {
  std::string target;
  bool read_only = true;
  std::string source;       // ro: the host file or directory
  int source_fd = -1;       //     and its descriptor, from OpenSources
  std::string storage_dir;  // rw: its copy in the storage
  int parent_fd = -1;       // ro file, with hide_host_paths: its directory, from OpenSources
  // ro: the runtime's own descriptor of the source, which it checked. What OpenSources opens by
  // name must be that same file, or the setup fails: the name may have been repointed since.
  // It is not bound itself, as it belongs to the runtime's mount namespace. -1: no check.
  int checked_fd = -1;
};

struct RootPlan {
  std::string newroot;      // an empty host directory to build on
  // A rootfs directory, mounted as the root through an overlay; empty for the host image.
  std::string image;
  int image_fd = -1;
  std::string storage;      // where the sandbox's writable filesystem is mounted
  int storage_fd = -1;
  std::vector<VolumeBind> volumes;  // sorted so parents come before children
  std::string workdir;
  uid_t uid = 0;  // the workload's, for /etc/passwd
  gid_t gid = 0;
  // The nameserver of the sandbox's /etc/resolv.conf, when it has egress; empty: no DNS.
  std::string resolver;
  // PEM certificates for the sandbox's trust store (SandboxSpec::ca_bundle), checked; empty:
  // the store as it is.
  std::string ca_bundle;
  // Read-only host volumes are mounted through an overlay that keeps their host paths out of
  // /proc/self/mountinfo (hidden_source.h). Where the kernel refuses that, they are bound as
  // they are and BuildRoot says so in *warnings.
  // The ns backend sets it; a microVM's sources are 9p shares that show nothing of the host.
  bool hide_host_paths = false;
  // An image's root takes the workload's writes, in its overlay's upper layer: a tmpfs capped at
  // this many MiB (SandboxSpec::writable_root). 0: the root is read-only.
  int64_t writable_root_mib = 0;
  // Files written into an image's root, in its writable layer (SandboxSpec::root_files): absolute
  // normal paths, at most kMaxRootFiles of at most kMaxRootFileBytes each.
  std::map<std::string, std::string> files;
  std::vector<std::string>* warnings = nullptr;
};

// The trust store entries (trust_store.h) of from_etc into to_etc, a directory of the setup's
// own: directories and files bound read-only, symlinks recreated to resolve in the new root.
// from_etc is the host's /etc, or a guest's rootfs: never a tree the sandbox wrote.
Expected<void> MirrorTrustStore(const std::string& from_etc, const std::string& to_etc);

// Opens the image, the storage and the ro volume sources, in this mount namespace.
Expected<void> OpenSources(RootPlan& plan);
Expected<void> BuildRoot(const RootPlan& plan);
// pivot_root into newroot and detach the old root, so no host path is reachable.
Expected<void> PivotInto(const std::string& newroot);
// The directory every /proc/self/fd/N path for fd reaches, for mounting from a descriptor.
std::string FdPath(int fd);

}  // namespace smolbox::confine
