// The guest artifacts scripts/build-guest makes: an uncompressed kernel, an initramfs whose
// /init is the agent, and the rootfs as an erofs image. The runtime opens them once and hands
// QEMU the descriptors, so a rebuild while a VM starts cannot swap a file under it.
//
//   auto guest = OpenGuestArtifacts(GuestDir());
//   if (!guest) ...   // names the directory and scripts/build-guest
#pragma once

#include <string>

#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::vm {

struct GuestArtifacts {
  std::string dir;
  UniqueFd kernel;     // vmlinux
  UniqueFd initramfs;  // initramfs.cpio
  UniqueFd rootfs;     // rootfs.erofs
};

// $SMOLBOX_GUEST_DIR; else /var/cache/smolbox/guest for root; else
// ${XDG_CACHE_HOME:-$HOME/.cache}/smolbox/guest. scripts/build-guest uses the same rule.
std::string GuestDir();

Expected<GuestArtifacts> OpenGuestArtifacts(const std::string& dir);

}  // namespace smolbox::vm
