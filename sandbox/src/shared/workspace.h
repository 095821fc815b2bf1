// What a run's host side prepares and collects, the same for both backends: the volume
// sources, the storage with rw volumes copied in, the copy-back afterwards, and stdin.
//
//   auto volumes = OpenVolumes(spec);
//   FillStorage(spec, *volumes, storage, owner_uid, owner_gid, result);
//   ... run ...
//   CopyBackVolumes(spec, *volumes, &storage, result);
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "smolbox/error.h"
#include "smolbox/result.h"
#include "smolbox/spec.h"
#include "storage.h"
#include "unique_fd.h"

namespace smolbox::shared {

// A volume source, opened by the runtime: rw volumes are copied in and back through this fd;
// ro ones are opened again by the sandbox's setup, since a bind source must belong to the
// setup's own mount namespace.
struct HostVolume {
  const Mount* mount;  // in the spec OpenVolumes was given, which must outlive it
  UniqueFd fd;  // none for a scratch directory
  size_t storage_index = 0;  // rw only: which storage vol<N> holds its copy
};

// The storage is mounted in a mount namespace of the runtime's own, which the sandbox's copies;
// the host never sees it, and it vanishes with this process however it ends.
Expected<void> EnterPrivateMountNamespace();

Expected<std::vector<HostVolume>> OpenVolumes(const SandboxSpec& spec);
// Lays the storage out for the sandbox's owner and copies every rw volume in, within the quota.
Expected<void> FillStorage(const SandboxSpec& spec, const std::vector<HostVolume>& volumes,
                           const Storage& storage, uid_t owner_uid, gid_t owner_gid, RunResult& result);
// Copies each rw volume's storage copy back to its host directory, sanitized; problems become
// warnings in the result.
void CopyBackVolumes(const SandboxSpec& spec, const std::vector<HostVolume>& volumes, const Storage& storage,
                     RunResult& result);
// A stdin file, opened for streaming: a regular file of any size, a pipe or a terminal.
Expected<UniqueFd> OpenStdinFile(const std::string& path);

}  // namespace smolbox::shared
