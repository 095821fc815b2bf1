#include "bench_main.h"

#include <fmt/core.h>

#include <atomic>

namespace smolbox::bench {
namespace {

std::atomic<int> failures{0};

}  // namespace

void Fail(benchmark::State& state, const std::string& message) {
  failures.fetch_add(1);
  state.SkipWithError(message.c_str());
}

int Main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (int n = failures.load(); n > 0) {
    fmt::print(stderr, "{} benchmark run(s) failed\n", n);
    return 1;
  }
  return 0;
}

}  // namespace smolbox::bench
