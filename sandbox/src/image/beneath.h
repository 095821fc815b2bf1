// Paths inside an image tree that is being built from hostile archives: every open stays
// beneath the tree's root and never follows a symlink, whatever an earlier entry or layer
// planted there (openat2 with RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS).
//
//   SMOLBOX_ASSIGN_OR_RETURN(auto parts, SplitEntryPath("./usr/bin/python3", "layer 1"));
//   SMOLBOX_ASSIGN_OR_RETURN(auto dir, OpenDirBeneath(root_fd, parts, parts.size() - 1, true, "layer 1"));
//   // dir is usr/bin, made where missing; "etc -> /etc" then "etc/x" fails instead
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::image {

// The longest entry path and symlink target accepted: the kernel's own PATH_MAX.
inline constexpr size_t kMaxEntryPath = 4096;

// The components of an archive entry's path. "./" prefixes, "." components and a trailing "/"
// are dropped, so the root itself ("./") has none; an absolute path, a ".." component or a NUL
// is refused, with `what` (the layer) and the path in the error.
Expected<std::vector<std::string>> SplitEntryPath(std::string_view path, std::string_view what);
std::string JoinPath(const std::vector<std::string>& parts, size_t count);

// openat2 beneath dir, refusing any symlink on the way, magic links and mount crossings.
int OpenBeneath(int dir, const std::string& path, int flags, mode_t mode = 0);

// The directory made of the first `count` parts, under root. With create, missing directories
// are made (0755); a symlink or a file on the way is refused, naming the path.
Expected<UniqueFd> OpenDirBeneath(int root, const std::vector<std::string>& parts, size_t count,
                                  bool create, std::string_view what);

// Removes name in dir and everything under it; links are removed, never followed. A missing
// name is no error.
Expected<void> RemoveTree(int dir, const std::string& name);

// Removes every entry of dir for which keep(name) is false.
template <typename Keep>
Expected<void> RemoveChildren(int dir, Keep keep);
Expected<std::vector<std::string>> ListNames(int dir);

template <typename Keep>
Expected<void> RemoveChildren(int dir, Keep keep) {
  SMOLBOX_ASSIGN_OR_RETURN(auto names, ListNames(dir));
  for (const std::string& name : names) {
    if (!keep(name)) SMOLBOX_TRY(RemoveTree(dir, name));
  }
  return {};
}

}  // namespace smolbox::image
