// Mutant builds, which measure the battery (smolvm-check mutate, docs/mutation.md): configured
// with -DSMOLBOX_MUTANTS=ON, the runtime and the agent skip each protection whose name is in
// SMOLBOX_DISABLE=NAME[,NAME]. A protection is guarded where it is applied:
//
//   if (SMOLBOX_PROTECTED("seccomp")) Require(plan, LoadSeccomp(plan));
//
// Without the option the macro is the literal `true`: a release binary holds no switch, no name
// and no read of SMOLBOX_DISABLE. The option is never on in scripts/setup's build.
//
// The runtime reads SMOLBOX_DISABLE once at start (LoadFromEnvironment); the names travel to the
// agent with every exec order, and to a microVM's agent with its setup message too.
#pragma once

#ifdef SMOLBOX_MUTANTS

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "smolbox/error.h"

namespace smolbox::mutant {

struct Protection {
  const char* name;
  const char* what;  // where it is applied, for --version
};

// Every switch this build has.
const std::vector<Protection>& Protections();
// SMOLBOX_DISABLE, checked: a name that is no switch is an error naming it.
Expected<void> LoadFromEnvironment();
// The agent's: the names its order carried (already checked by the runtime; checked again).
Expected<void> SetDisabled(const std::vector<std::string>& names);
const std::vector<std::string>& DisabledNames();
// No allocation: safe between fork and exec.
bool IsDisabled(const char* name) noexcept;
// "mutant build: SMOLBOX_DISABLE takes NAME, NAME...": for --version.
std::string Describe();
// The runtime's switches travel in an order's header as "disable": [NAME...]. An agent that is
// no mutant ignores the field (a message's unknown fields are), so its protections stay on.
void AddDisabledTo(nlohmann::json& header);
// The agent's: takes "disable" out of the header (so that the rest decodes as the release
// shape) and applies it; absent, no switch is off.
Expected<void> TakeDisabledFrom(nlohmann::json& header);

}  // namespace smolbox::mutant

#define SMOLBOX_PROTECTED(name) (!::smolbox::mutant::IsDisabled(name))

#else

#define SMOLBOX_PROTECTED(name) true

#endif
