// Spec parsing and the agent channel: work done on every run, before and after the workload.
#include <benchmark/benchmark.h>

#include "bench_main.h"
#include "channel.h"
#include "exec_protocol.h"
#include "smolbox/spec.h"

namespace {

constexpr const char* kSpec = R"json({
  "argv": ["/usr/bin/python3", "-c", "print(42)"],
  "env": {"A": "1", "B": "2"},
  "limits": {"timeout_ms": 5000, "memory_mib": 256, "cpus": 0.5, "pids": 32},
  "mounts": [{"source": "/tmp", "target": "/in", "mode": "ro"}]
})json";

void BM_ParseAndValidateSpec(benchmark::State& state) {
  for (auto _ : state) {
    auto spec = smolbox::ParseRunSpec(kSpec);
    benchmark::DoNotOptimize(smolbox::ValidateRunSpec(*spec));
  }
}
BENCHMARK(BM_ParseAndValidateSpec);

void BM_ChannelRoundTripOfAnExec(benchmark::State& state) {
  smolbox::ExecRequest request;
  request.argv = {"/usr/bin/python3", "-c", "print(42)"};
  request.env = {{"PATH", "/usr/bin"}, {"HOME", "/work"}};
  request.stdin_data.assign(static_cast<size_t>(state.range(0)), 'x');
  for (auto _ : state) {
    std::string frame = smolbox::channel::Encode(smolbox::EncodeExec(request));
    smolbox::channel::FrameReader reader;
    reader.Feed(frame.data(), frame.size());
    auto message = reader.Next();
    benchmark::DoNotOptimize(smolbox::DecodeExec(**message));
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ChannelRoundTripOfAnExec)->Arg(0)->Arg(1 << 20);

}  // namespace

int main(int argc, char** argv) { return smolbox::bench::Main(argc, argv); }
