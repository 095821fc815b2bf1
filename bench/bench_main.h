// A main for benchmark programs that exits non-zero when any benchmark failed. Google Benchmark
// 1.7 reports SkipWithError in its output but still exits 0, so CI would not notice.
//
//   if (result.status != smolbox::Status::kExited) {
//     smolbox::bench::Fail(state, "exec: " + result.error);
//     break;
//   }
//   ...
//   int main(int argc, char** argv) { return smolbox::bench::Main(argc, argv); }
#pragma once

#include <benchmark/benchmark.h>

#include <string>

namespace smolbox::bench {

// SkipWithError, remembered for the exit code. Leave the benchmark loop right after.
void Fail(benchmark::State& state, const std::string& message);

// Initialize, run the selected benchmarks, Shutdown. 1 if any benchmark failed, 2 on bad flags.
int Main(int argc, char** argv);

}  // namespace smolbox::bench
