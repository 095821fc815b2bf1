#include "smolbox/backend.h"

#include <unistd.h>

#include <chrono>

#include "ns/ns_backend.h"
#include "ns/workspace.h"
#include "vm/accel.h"
#include "vm/vm_backend.h"

namespace smolbox {

RunResult Backend::Run(const RunSpec& spec) {
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
  };
  auto start = Clock::now();
  RunResult setup;
  // Read before anything starts: a bad stdin file must not cost a sandbox (or a boot).
  auto stdin_data = ns::ReadStdin(spec);
  if (!stdin_data) {
    setup.status = Status::kSetupError;
    setup.error = stdin_data.error().ToString();
    setup.timings.setup_ms = ms_since(start);
    return setup;
  }
  auto session = Start(spec, setup);
  if (!session) return setup;
  RunResult result = session->Exec(spec, std::move(*stdin_data), -1);
  result.warnings.insert(result.warnings.begin(), setup.warnings.begin(), setup.warnings.end());
  result.timings.setup_ms = ms_since(start) - result.timings.run_ms - result.timings.teardown_ms;
  result.timings.boot_ms = setup.timings.boot_ms;
  auto teardown_start = Clock::now();
  session.reset();
  result.timings.teardown_ms += ms_since(teardown_start);
  return result;
}

Expected<std::unique_ptr<Backend>> MakeBackend(BackendKind kind) {
  switch (kind) {
    case BackendKind::kVm:
      return vm::MakeVmBackend();
    case BackendKind::kAuto:
      // Hardware isolation when this host has it (and the runtime is root, as the vm backend
      // needs); namespaces otherwise. The result says which ran.
      if (geteuid() == 0 && vm::KvmUnusableReason().empty()) return vm::MakeVmBackend();
      return ns::MakeNsBackend();
    case BackendKind::kNs:
      return ns::MakeNsBackend();
  }
  return std::unexpected(Error::Field("backend", "unknown backend"));
}

}  // namespace smolbox
