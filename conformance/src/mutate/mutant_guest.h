// A microVM mutant needs a guest whose agent is the mutant build's: a release agent ignores the
// switches an exec order carries, so its protections would stay on and every mutant would
// look like a survivor. The guest's manifest.json (scripts/build-guest) records the digest of
// its agent and the smolbox-egress-setup beside it; this compares it with the mutant's.
//
//   SMOLBOX_TRY(CheckMutantGuest("build-mutants/guest", "build-mutants/bin/smolbox-agent"));
#pragma once

#include <string>

#include "smolbox/error.h"

namespace smolvm_check {

// An error naming --guest-dir and what to run when the guest is missing or holds another agent.
smolbox::Expected<void> CheckMutantGuest(const std::string& guest_dir, const std::string& agent);

}  // namespace smolvm_check
