#include "accel.h"

#include <fmt/format.h>

#include "smolbox/host.h"

namespace smolbox::vm {
namespace {

constexpr const char* kFallback =
    "run it on a KVM host instead: smolvm-check remote github --repo OWNER/NAME; "
    "or ask for emulation explicitly with --accel tcg (slow)";

}  // namespace

Expected<Accel> ChooseAccel(Accel asked) {
  if (asked == Accel::kTcg) return Accel::kTcg;
  std::string why = host::KvmUnusableReason();
  if (why.empty()) return Accel::kKvm;
  return std::unexpected(Error{"accel", fmt::format("KVM is not usable here ({}); {}", why, kFallback), 0});
}

}  // namespace smolbox::vm
