#include "python_sdk_run.h"

#include "test_support.h"

namespace smolbox::testing {

namespace {

constexpr const char* kSdkRun = R"(
import json, sys, smolbox
address, spec = sys.argv[1], json.loads(sys.argv[2])
argv = spec.pop("argv")
limits = spec.pop("limits", {})
if "timeout_ms" in limits: spec["timeout"] = limits.pop("timeout_ms") / 1000
if "cpu_ms" in limits: spec["cpu_time"] = limits.pop("cpu_ms") / 1000
r = smolbox.run(argv, client=smolbox.Client(address), check=False, **spec, **limits)
print(json.dumps({"status": r.status, "exit_code": r.exit_code, "stdout": r.stdout}))
)";

}  // namespace

nlohmann::json RunThroughPythonSdk(const std::string& address, const nlohmann::json& spec, std::string* error) {
  ProgramOptions options;
  options.extra_env = {"PYTHONPATH=" SMOLBOX_SDK_PYTHON_DIR, "PYTHONDONTWRITEBYTECODE=1"};
  ProgramRun sdk = RunProgram({"/usr/bin/python3", "-c", kSdkRun, address, spec.dump()}, options);
  if (error != nullptr) *error = sdk.err;
  return nlohmann::json::parse(sdk.out, nullptr, false);
}

}  // namespace smolbox::testing
