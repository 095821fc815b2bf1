// A RunSpec from a --spec file or an API client: parsed, then validated (which only stats).
#include "fuzz_input.h"
#include "smolbox/spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto spec = smolbox::ParseRunSpec(std::string(smolbox::fuzz::AsText(data, size)));
  if (spec) (void)smolbox::ValidateRunSpec(*spec);
  return 0;
}
