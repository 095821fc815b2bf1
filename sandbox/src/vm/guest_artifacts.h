// The guest artifacts scripts/build-guest makes: an uncompressed kernel, an initramfs whose
// /init is the agent, and the rootfs as an erofs image. The runtime opens them once and hands
// QEMU the descriptors, so a rebuild while a VM starts cannot swap a file under it.
//
//   auto guest = OpenGuestArtifacts(smolbox::GuestDir());   // core/guest_dir.h
//   if (!guest) ...   // names the directory and scripts/build-guest
#pragma once

#include <string>

#include "guest_dir.h"
#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::vm {

struct GuestArtifacts {
  std::string dir;
  UniqueFd kernel;     // vmlinux
  UniqueFd initramfs;  // initramfs.cpio
  UniqueFd rootfs;     // rootfs.erofs
};

Expected<GuestArtifacts> OpenGuestArtifacts(const std::string& dir);

}  // namespace smolbox::vm
