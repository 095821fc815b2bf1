// The battery's catalog, as if it were adversarial/catalog.json: payloads resolve against the
// real adversarial/ directory, so a seed from the catalog itself loads whole.
#include "battery/catalog.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(smolbox::fuzz::AsText(data, size));
  auto catalog = smolvm_check::ParseCatalog(text, SMOLVM_CHECK_ADVERSARIAL_DIR "/catalog.json");
  if (!catalog) return 0;
  for (const auto& c : smolvm_check::SelectCases(*catalog, {"*"}, "")) {
    (void)c.Limit("output_bytes");
    (void)c.Limit("cpus");
  }
  return 0;
}
