// The sandbox's own cost, around the workload: starting and tearing down a sandbox, one exec
// round trip through a warm agent, and a whole cold run, each on a real sandbox.
//
// SMOLBOX_BENCH_VM=tcg (or kvm, auto) also registers a warm exec on the vm backend; it is off
// by default because its session boots a microVM, which takes seconds under TCG.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench_main.h"
#include "smolbox/backend.h"
#include "smolbox/result.h"
#include "smolbox/spec.h"

namespace smolbox::bench {
namespace {

// Modest limits, so the numbers do not depend on how big the defaults are.
RunSpec BenchSpec(BackendKind backend, std::vector<std::string> argv) {
  RunSpec spec;
  spec.sandbox.backend = backend;
  spec.sandbox.image = "host";
  spec.sandbox.limits.memory_mib = 256;
  spec.sandbox.limits.pids = 32;
  spec.sandbox.limits.storage_mib = 64;
  spec.exec.argv = std::move(argv);
  spec.exec.limits.timeout_ms = 10000;
  return spec;
}

std::unique_ptr<Backend> BackendOrFail(benchmark::State& state, BackendKind kind) {
  auto backend = MakeBackend(kind);
  if (!backend) {
    Fail(state, "MakeBackend: " + backend.error().ToString());
    return nullptr;
  }
  return std::move(*backend);
}

std::unique_ptr<Session> StartOrFail(benchmark::State& state, Backend& backend,
                                     const SandboxSpec& spec) {
  RunResult setup;
  auto session = backend.Start(spec, setup);
  if (!session) Fail(state, "Start: " + ToString(setup.status) + ": " + setup.error);
  return session;
}

// The workload ran and exited 0; otherwise the benchmark fails, saying how it ended.
bool ExitedZeroOrFail(benchmark::State& state, const RunResult& result) {
  if (result.status == Status::kExited && result.exit_code == 0) return true;
  Fail(state, "the workload ended " + ToString(result.status) + " exit " +
                  std::to_string(result.exit_code) +
                  (result.error.empty() ? "" : ": " + result.error) +
                  (result.stderr_data.empty() ? "" : "; stderr: " + result.stderr_data));
  return false;
}

void BM_NsStartAndTeardown(benchmark::State& state) {
  auto backend = BackendOrFail(state, BackendKind::kNs);
  if (!backend) return;
  RunSpec spec = BenchSpec(BackendKind::kNs, {});
  for (auto _ : state) {
    auto session = StartOrFail(state, *backend, spec.sandbox);
    if (!session) break;
    session.reset();
  }
}
BENCHMARK(BM_NsStartAndTeardown)->UseRealTime()->Unit(benchmark::kMillisecond);

// One iteration is one Exec on a session started before the loop: the agent round trip.
void WarmExec(benchmark::State& state, BackendKind kind, Accel accel,
              std::vector<std::string> argv) {
  auto backend = BackendOrFail(state, kind);
  if (!backend) return;
  RunSpec spec = BenchSpec(kind, std::move(argv));
  spec.sandbox.accel = accel;
  auto session = StartOrFail(state, *backend, spec.sandbox);
  if (!session) return;
  for (auto _ : state) {
    RunResult result = session->Exec(spec.exec, {}, -1);
    if (!ExitedZeroOrFail(state, result)) break;
  }
}

void BM_NsWarmExec(benchmark::State& state, std::vector<std::string> argv) {
  WarmExec(state, BackendKind::kNs, Accel::kAuto, std::move(argv));
}
// Always /usr/bin/python3: python3 on PATH may be a pyenv shim, a shell script that execs more.
BENCHMARK_CAPTURE(BM_NsWarmExec, true, std::vector<std::string>{"/bin/true"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_NsWarmExec, python_pass,
                  std::vector<std::string>{"/usr/bin/python3", "-c", "pass"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Start, one exec, teardown: what `smolbox run` pays per command.
void BM_NsColdRun(benchmark::State& state) {
  auto backend = BackendOrFail(state, BackendKind::kNs);
  if (!backend) return;
  RunSpec spec = BenchSpec(BackendKind::kNs, {"/bin/true"});
  for (auto _ : state) {
    if (!ExitedZeroOrFail(state, backend->Run(spec))) break;
  }
}
BENCHMARK(BM_NsColdRun)->UseRealTime()->Unit(benchmark::kMillisecond);

// Registered by hand, so it exists only when asked for. A bad value fails the run rather than
// silently skipping the benchmark.
[[maybe_unused]] const bool kVmRegistered = [] {
  const char* value = std::getenv("SMOLBOX_BENCH_VM");
  if (value == nullptr || *value == '\0' || std::string(value) == "0") return false;
  auto accel = ParseAccel(value);
  std::string name = std::string("BM_VmWarmExec/true/") + value;
  benchmark::RegisterBenchmark(name.c_str(),
                               [accel](benchmark::State& state) {
                                 if (!accel) {
                                   Fail(state, "SMOLBOX_BENCH_VM: " + accel.error().ToString());
                                   return;
                                 }
                                 WarmExec(state, BackendKind::kVm, *accel, {"/bin/true"});
                               })
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  return true;
}();

}  // namespace
}  // namespace smolbox::bench

int main(int argc, char** argv) { return smolbox::bench::Main(argc, argv); }
