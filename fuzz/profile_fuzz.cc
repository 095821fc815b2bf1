// A sandbox profile (conformance/profiles/*.json or a path given to --sandbox), parsed and then
// rendered for one case that uses every placeholder: its mounts, env, limits, args and stdin.
#include "fuzz_input.h"
#include "launch/profile.h"

namespace {

const smolvm_check::Case& EveryPlaceholderCase() {
  static const smolvm_check::Case c = [] {
    smolvm_check::Case out;
    out.id = "fuzz.case";
    out.category = "fs";
    out.lang = "python";
    out.payload = "/payloads/python/case.py";
    out.args = {"{mount:in}", "{workdir}", "{canary_file}", "plain"};
    out.stdin_data = "input";
    out.env = {{"A", "1"}, {"B", "two words"}};
    out.limits = {{"timeout_ms", 2000}, {"memory_mib", 64}, {"cpus", 500}, {"pids", 16},
                  {"output_bytes", 4096}, {"cpu_ms", 1000}};
    out.mounts = {{"in", "/in", true, {}}, {"out", "/out", false, {}}};
    return out;
  }();
  return c;
}

smolvm_check::Placement Place() {
  smolvm_check::Placement p;
  p.mount_sources = {{"in", "/tmp/fuzz/in"}, {"out", "/tmp/fuzz/out"}};
  p.payload_dir = "/tmp/fuzz/payloads";
  p.workdir_host = "/tmp/fuzz/work";
  p.hints = {{"canary_file", "/tmp/fuzz/canary"}};
  p.marker = "fuzz-marker";
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(smolbox::fuzz::AsText(data, size));
  auto profile = smolvm_check::ParseProfile(text, "fuzz.json");
  if (!profile) return 0;
  static const smolvm_check::Placement placement = Place();
  (void)smolvm_check::RenderCommand(*profile, EveryPlaceholderCase(), placement);
  (void)smolvm_check::UnsupportedLimits(*profile, EveryPlaceholderCase());
  return 0;
}
