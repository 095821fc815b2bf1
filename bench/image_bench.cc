// The image store's import, the figures: a 200 MB image imported into an empty store
// (MB/s, as bytes processed), and the same image again, whose layers are already there.
//   build/bin/smolbox_image_bench --benchmark_repetitions=3
// The image is an OCI layout of four plain-tar layers of 50 MiB of random bytes each (1 MiB
// files), written by the tests' image builder: the cost is the digests, the copy into the
// store and the extraction, not a decompressor.
#include <benchmark/benchmark.h>

#include <random>
#include <stdexcept>

#include "bench_main.h"
#include "image_builder.h"
#include "smolbox/image_store.h"
#include "test_support.h"

namespace {

using smolbox::testing::File;
using smolbox::testing::OciLayout;
using smolbox::testing::TempDir;

constexpr int kLayers = 4;
constexpr int kFilesPerLayer = 50;
constexpr size_t kFileBytes = 1 << 20;

// One layout for the whole program: writing it is not what is measured.
const std::string& Layout() {
  static TempDir dir("image-bench");
  static std::string path = [] {
    std::mt19937_64 random(42);
    std::vector<std::string> layers;
    for (int l = 0; l < kLayers; ++l) {
      std::vector<smolbox::testing::TarEntry> files;
      for (int f = 0; f < kFilesPerLayer; ++f) {
        std::string bytes(kFileBytes, '\0');
        for (size_t i = 0; i < bytes.size(); i += 8) {
          uint64_t word = random();
          bytes.replace(i, 8, reinterpret_cast<const char*>(&word), 8);
        }
        files.push_back(File("layer" + std::to_string(l) + "/file" + std::to_string(f), std::move(bytes)));
      }
      layers.push_back(smolbox::testing::MakeTar(files));
    }
    OciLayout layout(dir.path() + "/layout");
    layout.AddImage(layers, smolbox::testing::Config({"PATH=/usr/bin"}), "bench");
    return layout.dir();
  }();
  return path;
}

constexpr int64_t kImageBytes = int64_t{kLayers} * kFilesPerLayer * kFileBytes;

smolbox::image::ImportOptions Named() {
  smolbox::image::ImportOptions options;
  options.name = "bench:1";
  return options;
}

// Into an empty store each time.
void BM_ImportIntoEmptyStore(benchmark::State& state) {
  const std::string& layout = Layout();
  for (auto _ : state) {
    state.PauseTiming();
    auto store_dir = std::make_unique<TempDir>("image-bench-store");
    auto store = smolbox::image::ImageStore::Open(store_dir->path() + "/store");
    if (!store) throw std::runtime_error(store.error().ToString());
    state.ResumeTiming();
    auto imported = store->Import(layout, Named());
    if (!imported) {
      smolbox::bench::Fail(state, "import: " + imported.error().ToString());
      break;
    }
    state.PauseTiming();
    store_dir.reset();
    state.ResumeTiming();
  }
  state.SetBytesProcessed(state.iterations() * kImageBytes);
}
BENCHMARK(BM_ImportIntoEmptyStore)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

// The same image into a store that holds it: its config's digest is found, nothing is copied.
void BM_ImportAgain(benchmark::State& state) {
  TempDir store_dir("image-bench-store");
  auto store = smolbox::image::ImageStore::Open(store_dir.path() + "/store");
  if (!store) throw std::runtime_error(store.error().ToString());
  if (auto first = store->Import(Layout(), Named()); !first) throw std::runtime_error(first.error().ToString());
  for (auto _ : state) {
    auto again = store->Import(Layout(), Named());
    if (!again) {
      smolbox::bench::Fail(state, "import again: " + again.error().ToString());
      break;
    }
  }
}
BENCHMARK(BM_ImportAgain)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) { return smolbox::bench::Main(argc, argv); }
