// The agent binary the sandbox runs as its init, as a sealed in-memory copy.
//
// The sandbox executes the copy, not the file: a workload that reached /proc/1/exe would find
// an immutable memfd rather than a host binary it could overwrite (runc's CVE-2019-5736).
#pragma once

#include <string>

#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::ns {

// smolbox-agent next to the running executable, or $SMOLBOX_AGENT when set.
Expected<std::string> FindAgent();
Expected<UniqueFd> SealedAgentCopy(const std::string& path);

}  // namespace smolbox::ns
