// An OCI engine's rootfs, shown to the sandbox as its own. The engine unpacked it owned by host
// ids 0-65535, which a sandbox never maps: its root would own nothing in its own root, and a
// mode 0600 file of the image's root would be unreadable to it. Mounted idmapped to the
// sandbox's map, host id N shows as the sandbox's N, while on the host nothing changes owner.
#pragma once

#include <string>

#include "smolbox/error.h"
#include "user.h"

namespace smolbox::ns {

// Mounts image at target (an empty directory of the runtime's private mount namespace, which
// the sandbox's is cloned from), idmapped through identity's map. Root only. An overlay mount
// (podman's, containerd's snapshots) cannot be idmapped itself, so its layers are, and stacked
// again read-only; the sandbox's own writable layer goes on top as for any image.
Expected<void> MountIdmappedImage(const std::string& image, const confine::Identity& identity,
                                  const std::string& target);

}  // namespace smolbox::ns
