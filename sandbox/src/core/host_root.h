// Whether this process is root of the host: uid 0 of the host's own user namespace, which may
// idmap mounts, loop-mount disks and make cgroups at the top. uid 0 of a user namespace that
// maps only a few ids (rootless podman runs its runtime so) is an unprivileged user to all of
// that, and smolbox takes its rootless paths there.
#pragma once

namespace smolbox {

bool IsHostRoot();

}  // namespace smolbox
