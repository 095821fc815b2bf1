#include "smolbox/backend.h"

#include <unistd.h>

#include "ns/ns_backend.h"
#include "vm/accel.h"
#include "vm/vm_backend.h"

namespace smolbox {

Expected<std::unique_ptr<Backend>> MakeBackend(BackendKind kind) {
  switch (kind) {
    case BackendKind::kVm:
      return vm::MakeVmBackend();
    case BackendKind::kAuto:
      // Hardware isolation when this host has it (and the runtime is root, as the vm backend
      // needs); namespaces otherwise. The result says which ran.
      if (geteuid() == 0 && vm::KvmUnusableReason().empty()) return vm::MakeVmBackend();
      return ns::MakeNsBackend();
    case BackendKind::kNs:
      return ns::MakeNsBackend();
  }
  return std::unexpected(Error::Field("backend", "unknown backend"));
}

}  // namespace smolbox
