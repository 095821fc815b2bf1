// The agent's exit report (what a hostile guest tells the host about its run), and the exec
// request the agent decodes. A decoded message must encode and decode to the same fields.
#include "exec_protocol.h"
#include "fuzz_input.h"

namespace {

using smolbox::fuzz::Require;

void CheckExit(const smolbox::channel::Message& message) {
  auto report = smolbox::DecodeExit(message);
  if (!report) return;
  auto again = smolbox::DecodeExit(smolbox::EncodeExit(*report));
  Require(again.has_value(), "an encoded report decodes");
  Require(again->status == report->status && again->exit_code == report->exit_code &&
              again->signal == report->signal && again->wall_ms == report->wall_ms &&
              again->cpu_ms == report->cpu_ms && again->error == report->error &&
              again->limits_hit == report->limits_hit,
          "a report survives a round trip");
}

void CheckExec(const smolbox::channel::Message& message) {
  auto request = smolbox::DecodeExec(message);
  if (!request) return;
  auto again = smolbox::DecodeExec(smolbox::EncodeExec(*request));
  Require(again.has_value(), "an encoded exec decodes");
  Require(again->argv == request->argv && again->env == request->env && again->cwd == request->cwd &&
              again->timeout_ms == request->timeout_ms && again->stdin_stream == request->stdin_stream,
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
