// Which accelerator a VM runs on. KVM counts only when the host report's own rule says it is
// usable (smolbox::host::KvmUnusableReason: hardware-backed, open to this process and to the
// confined QEMU, and it creates a VM); otherwise only TCG, QEMU's emulation, when asked for.
#pragma once

#include <string>

#include "smolbox/error.h"
#include "smolbox/spec.h"

namespace smolbox::vm {

// The accelerator for `asked`: kvm when usable for kAuto/kKvm, tcg only when asked for. The
// error names the fallback command.
Expected<Accel> ChooseAccel(Accel asked);

}  // namespace smolbox::vm
