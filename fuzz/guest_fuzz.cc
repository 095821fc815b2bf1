// The microVM's setup and restore messages, as the agent in the guest decodes them.
#include "fuzz_input.h"
#include "guest_protocol.h"

namespace {

using smolbox::fuzz::Require;

void CheckSetup(const smolbox::channel::Message& message) {
  auto setup = smolbox::DecodeGuestSetup(message);
  if (!setup) return;
  auto again = smolbox::DecodeGuestSetup(smolbox::EncodeGuestSetup(*setup));
  Require(again.has_value(), "an encoded setup decodes");
  Require(again->volumes.size() == setup->volumes.size() && again->workdir == setup->workdir &&
              again->uid == setup->uid && again->memory_bytes == setup->memory_bytes,
          "a setup survives a round trip");
}

void CheckRestore(const smolbox::channel::Message& message) {
  auto restore = smolbox::DecodeGuestRestore(message);
  if (!restore) return;
  auto again = smolbox::DecodeGuestRestore(smolbox::EncodeGuestRestore(*restore));
  Require(again.has_value(), "an encoded restore decodes");
  Require(again->seed == restore->seed && again->hostname == restore->hostname &&
              again->realtime_sec == restore->realtime_sec,
          "a restore survives a round trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto message = smolbox::fuzz::AsMessage(smolbox::fuzz::AsText(data, size));
  if (!message) return 0;
  CheckSetup(*message);
  CheckRestore(*message);
  return 0;
}
