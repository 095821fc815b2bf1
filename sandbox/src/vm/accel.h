// Which accelerator a VM runs on. KVM counts only when it is hardware-backed (VT-x or AMD-V)
// and this process can open /dev/kvm and create a VM; otherwise only TCG, QEMU's emulation.
#pragma once

#include <string>

#include "smolbox/error.h"
#include "smolbox/spec.h"

namespace smolbox::vm {

// Why KVM cannot be used here; empty when it can.
std::string KvmUnusableReason();

// The accelerator for `asked`: kvm when usable for kAuto/kKvm, tcg only when asked for. The
// error names the fallback command.
Expected<Accel> ChooseAccel(Accel asked);

}  // namespace smolbox::vm
