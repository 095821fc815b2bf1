// The namespace backend: Linux namespaces, cgroups, seccomp and rlimits on the host's kernel.
// Honest about its isolation: result.isolation is "namespaces".
#pragma once

#include <memory>

#include "smolbox/backend.h"

namespace smolbox::ns {

std::unique_ptr<Backend> MakeNsBackend();

}  // namespace smolbox::ns
