#include "smolbox/error.h"

#include <system_error>

namespace smolbox {

std::string Error::ToString() const {
  // std::generic_category().message() is thread-safe where strerror() is not.
  std::string reason = what;
  if (errnum != 0) {
    std::string sys = std::generic_category().message(errnum);
    reason = reason.empty() ? sys : reason + " (" + sys + ")";
  }
  if (where.empty()) return reason.empty() ? "unknown error" : reason;
  if (reason.empty()) return where;
  return where + ": " + reason;
}

}  // namespace smolbox
