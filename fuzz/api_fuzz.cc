// The body of an exec request from an API client: parsed and validated, or an error naming a
// field; a request that parses always has a command and streams its output.
#include "exec_request.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto request = smolbox::api::ParseExecRequest(std::string(smolbox::fuzz::AsText(data, size)));
  if (request) {
    smolbox::fuzz::Require(!request->order.argv.empty(), "an accepted exec request has a command");
    smolbox::fuzz::Require(request->order.streams_output, "an accepted exec request streams its output");
    smolbox::fuzz::Require(request->order.sends_stdin == request->stdin_data.has_value(),
                           "stdin is sent exactly when the request has one");
  } else {
    smolbox::fuzz::Require(!request.error().where.empty(), "an error names its field");
  }
  return 0;
}
