// The CLI's and specs' durations and sizes ("1.5s", "64M").
#include "fuzz_input.h"
#include "smolbox/units.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text = smolbox::fuzz::AsText(data, size);
  auto ms = smolbox::ParseDuration(text);
  smolbox::fuzz::Require(!ms || *ms >= 0, "a duration is never negative");
  auto bytes = smolbox::ParseBytes(text);
  smolbox::fuzz::Require(!bytes || *bytes >= 0, "a size is never negative");
  auto mib = smolbox::ParseSizeMiB(text);
  smolbox::fuzz::Require(!mib || (bytes && *bytes == *mib * (1 << 20)),
                         "a size in MiB is the same size in bytes");
  return 0;
}
