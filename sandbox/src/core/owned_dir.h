// A directory of smolbox's own state (its runs, its cache, the image store): made where missing,
// and refused unless it is a directory, no symlink, owned by this user. A directory that
// another user made or could write into would let them plant what smolbox then trusts.
#pragma once

#include <sys/types.h>

#include <string>

#include "smolbox/error.h"

namespace smolbox {

// Makes path with mode where missing; sets mode where it differs.
Expected<void> EnsureOwnedDir(const std::string& path, mode_t mode);

}  // namespace smolbox
