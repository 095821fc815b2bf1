// The vm backend: every run in its own microVM, QEMU's microvm machine on KVM, or on TCG
// (emulation) when asked for, with the agent as the guest's /init.
#pragma once

#include <memory>

#include "smolbox/backend.h"

namespace smolbox::vm {

std::unique_ptr<Backend> MakeVmBackend();

}  // namespace smolbox::vm
