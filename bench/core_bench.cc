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
  for (auto _ : state) {
    std::string frame = smolbox::channel::Encode(smolbox::EncodeExec(request));
    smolbox::channel::FrameReader reader;
    reader.Feed(frame.data(), frame.size());
    auto message = reader.Next();
    benchmark::DoNotOptimize(smolbox::DecodeExec(**message));
  }
}
BENCHMARK(BM_ChannelRoundTripOfAnExec);

// Stdin streams in frames of this size: their cost bounds the stream's rate.
void BM_ChannelRoundTripOfAStdinChunk(benchmark::State& state) {
  std::string chunk(smolbox::kStdinChunkBytes, 'x');
  for (auto _ : state) {
    std::string frame = smolbox::channel::Encode(smolbox::EncodeStdin(chunk));
    smolbox::channel::FrameReader reader;
    reader.Feed(frame.data(), frame.size());
    benchmark::DoNotOptimize(reader.Next());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(chunk.size()));
}
BENCHMARK(BM_ChannelRoundTripOfAStdinChunk);

}  // namespace

int main(int argc, char** argv) { return smolbox::bench::Main(argc, argv); }
