// Paths in the sandbox's new root, resolved as the sandbox itself will see them once it has
// pivoted into it, before it has.
//
// An image's tree holds whatever symlinks its author put there. Resolved from the host, a
// "work -> /etc" in the image leads to the host's /etc; resolved with openat2's
// RESOLVE_IN_ROOT from the new root's descriptor, it leads to the image's own /etc, and ".."
// stops at the new root. Every mount point the setup makes in an image goes through here.
//
//   SMOLBOX_ASSIGN_OR_RETURN(auto point, OpenInRoot(root_fd, "/work", MakeMissing::kDirectories));
//   mount(source, FdPath(point.get()), ...);  // onto the image's /etc, if /work links there
#pragma once

#include <string>

#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::confine {

enum class MakeMissing {
  kNothing,      // every component must exist
  kDirectories,  // missing components are made as directories (0755)
  kFile,         // the same, but the last one is made as an empty file (0644)
};

// An O_PATH descriptor of path (absolute, as the sandbox names it) in the tree root_fd opens.
// A ".." component is refused; a symlink or a file where a directory is needed is an error that
// names the path. The descriptor names the directory entry as it is now: after a mount onto
// it, open the path again to reach the mount.
Expected<UniqueFd> OpenInRoot(int root_fd, const std::string& path, MakeMissing make);

}  // namespace smolbox::confine
