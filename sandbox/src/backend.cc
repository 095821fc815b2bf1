#include "smolbox/backend.h"

#include "ns/ns_backend.h"

namespace smolbox {

Expected<std::unique_ptr<Backend>> MakeBackend(BackendKind kind) {
  switch (kind) {
    case BackendKind::kVm:
      return std::unexpected(Error::Field(
          "backend", "the vm backend is not available yet; use --backend ns or auto"));
    case BackendKind::kAuto:  // vm joins the choice when it lands; until then ns is all there is
    case BackendKind::kNs:
      return ns::MakeNsBackend();
  }
  return std::unexpected(Error::Field("backend", "unknown backend"));
}

}  // namespace smolbox
