#include "smolbox/backend.h"

#include <unistd.h>

#include <chrono>

#include "accel.h"
#include "ns_backend.h"
#include "smolbox/host.h"
#include "vm_backend.h"
#include "workspace.h"

namespace smolbox {

RunResult Backend::Run(const RunSpec& spec, ExecIo io) {
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
  };
  auto start = Clock::now();
  RunResult setup;
  UniqueFd stdin_file;
  if (!io.has_stdin() && spec.exec.stdin_file) {
    // Opened before anything starts: a bad stdin file must not cost a sandbox (or a boot).
    auto opened = shared::OpenStdinFile(*spec.exec.stdin_file);
    if (!opened) {
      setup.status = Status::kSetupError;
      setup.error = opened.error().ToString();
      setup.timings.setup_ms = ms_since(start);
      return setup;
    }
    stdin_file = std::move(*opened);
    io.stdin_fd = stdin_file.get();
  } else if (!io.has_stdin() && spec.exec.stdin_data) {
    io.stdin_data = *spec.exec.stdin_data;
  }
  auto session = Start(spec.sandbox, setup);
  if (!session) return setup;
  RunResult result = session->Exec(spec.exec, io, -1);
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
      // Hardware isolation when this host has it, with or without root; namespaces otherwise.
      // The result says which ran.
      if (host::KvmUnusableReason().empty()) return vm::MakeVmBackend();
      return ns::MakeNsBackend();
    case BackendKind::kNs:
      return ns::MakeNsBackend();
  }
  return std::unexpected(Error::Field("backend", "unknown backend"));
}

}  // namespace smolbox
