// The microVM's setup and restore messages, as the agent in the guest decodes them. A decoded
// message must encode and decode to the same encoding.
#include "fuzz_input.h"
#include "guest_protocol.h"

namespace {

using smolbox::fuzz::Require;

void CheckSetup(const smolbox::channel::Message& message) {
  auto setup = smolbox::DecodeGuestSetup(message);
  if (!setup) return;
  auto again = smolbox::DecodeGuestSetup(smolbox::EncodeGuestSetup(*setup));
  Require(again.has_value(), "an encoded setup decodes");
  Require(smolbox::EncodeGuestSetup(*again).header == smolbox::EncodeGuestSetup(*setup).header,
          "a setup survives a round trip");
}

void CheckRestore(const smolbox::channel::Message& message) {
  auto restore = smolbox::DecodeGuestRestore(message);
  if (!restore) return;
  auto again = smolbox::DecodeGuestRestore(smolbox::EncodeGuestRestore(*restore));
  Require(again.has_value(), "an encoded restore decodes");
  Require(again->seed == restore->seed &&
              smolbox::EncodeGuestRestore(*again).header == smolbox::EncodeGuestRestore(*restore).header,
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
