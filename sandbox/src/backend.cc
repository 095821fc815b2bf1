#include "smolbox/backend.h"

#include "ns/ns_backend.h"

namespace smolbox {

Expected<std::unique_ptr<Backend>> MakeBackend(BackendKind kind) {
  switch (kind) {
    case BackendKind::kVm:
      // Until the microVM backend lands, no host runs it; a host with KVM is one command away.
      return std::unexpected(Error::Field(
          "backend", "the vm backend is not available in this build; use --backend ns, or run "
                     "the battery on a KVM host with: smolvm-check remote github --repo OWNER/NAME"));
    case BackendKind::kAuto:  // vm joins the choice when it lands; until then ns is all there is
    case BackendKind::kNs:
      return ns::MakeNsBackend();
  }
  return std::unexpected(Error::Field("backend", "unknown backend"));
}

}  // namespace smolbox
