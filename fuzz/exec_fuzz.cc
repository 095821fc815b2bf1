// The agent's exit report (what a hostile guest tells the host about its run), and the exec
// request the agent decodes. A decoded message must encode and decode to the same fields: the
// same encoding, every field of which the struct's one description lists.
#include "exec_protocol.h"
#include "fuzz_input.h"

namespace {

using smolbox::fuzz::Require;

void CheckExit(const smolbox::channel::Message& message) {
  auto report = smolbox::DecodeExit(message);
  if (!report) return;
  auto again = smolbox::DecodeExit(smolbox::EncodeExit(*report));
  Require(again.has_value(), "an encoded report decodes");
  Require(smolbox::EncodeExit(*again).header == smolbox::EncodeExit(*report).header,
          "a report survives a round trip");
}

void CheckExec(const smolbox::channel::Message& message) {
  auto request = smolbox::DecodeExec(message);
  if (!request) return;
  auto again = smolbox::DecodeExec(smolbox::EncodeExec(*request));
  Require(again.has_value(), "an encoded exec decodes");
  Require(smolbox::EncodeExec(*again).header == smolbox::EncodeExec(*request).header,
          "an exec survives a round trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto message = smolbox::fuzz::AsMessage(smolbox::fuzz::AsText(data, size));
  if (!message) return 0;
  CheckExit(*message);
  CheckExec(*message);
  (void)smolbox::IsCancel(*message);
  return 0;
}
