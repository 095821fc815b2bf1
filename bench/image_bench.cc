// The image store's import, the figures: a 200 MB image imported into an empty store
// (MB/s, as bytes processed), and the same image again, whose layers are already there; from
// an OCI layout directory, and from a docker save tar.
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

// The layers, and the layout and docker save tar made of them, once for the whole program:
// writing them is not what is measured.
const std::vector<std::string>& Layers() {
  static std::vector<std::string> layers = [] {
    std::mt19937_64 random(42);
    std::vector<std::string> made;
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
      made.push_back(smolbox::testing::MakeTar(files));
    }
    return made;
  }();
  return layers;
}

TempDir& Inputs() {
  static TempDir dir("image-bench");
  return dir;
}

const std::string& Layout() {
  static std::string path = [] {
    OciLayout layout(Inputs().path() + "/layout");
    layout.AddImage(Layers(), smolbox::testing::Config({"PATH=/usr/bin"}), "bench");
    return layout.dir();
  }();
  return path;
}

// As `docker save` writes it: the manifest last, after the layers.
const std::string& SaveTar() {
  static std::string path = [] {
    std::string file = Inputs().path() + "/save.tar";
    smolbox::testing::WriteFile(file, smolbox::testing::DockerSaveTar(Layers(), smolbox::testing::Config({"PATH=/usr/bin"}), {"bench:1"}));
    return file;
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
void ImportIntoEmptyStore(benchmark::State& state, const std::string& input) {
  for (auto _ : state) {
    state.PauseTiming();
    auto store_dir = std::make_unique<TempDir>("image-bench-store");
    auto store = smolbox::image::ImageStore::Open(store_dir->path() + "/store");
    if (!store) throw std::runtime_error(store.error().ToString());
    state.ResumeTiming();
    auto imported = store->Import(input, Named());
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

// The same image into a store that holds it: its config's digest is found, nothing is copied.
// A tar is read for its small files only, its layers skipped by seeking.
void ImportAgain(benchmark::State& state, const std::string& input) {
  TempDir store_dir("image-bench-store");
  auto store = smolbox::image::ImageStore::Open(store_dir.path() + "/store");
  if (!store) throw std::runtime_error(store.error().ToString());
  if (auto first = store->Import(input, Named()); !first) throw std::runtime_error(first.error().ToString());
  for (auto _ : state) {
    auto again = store->Import(input, Named());
    if (!again) {
      smolbox::bench::Fail(state, "import again: " + again.error().ToString());
      break;
    }
  }
}

void BM_ImportIntoEmptyStore(benchmark::State& state) { ImportIntoEmptyStore(state, Layout()); }
void BM_ImportAgain(benchmark::State& state) { ImportAgain(state, Layout()); }
void BM_ImportSaveTarIntoEmptyStore(benchmark::State& state) { ImportIntoEmptyStore(state, SaveTar()); }
void BM_ImportSaveTarAgain(benchmark::State& state) { ImportAgain(state, SaveTar()); }
BENCHMARK(BM_ImportIntoEmptyStore)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();
BENCHMARK(BM_ImportAgain)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ImportSaveTarIntoEmptyStore)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();
BENCHMARK(BM_ImportSaveTarAgain)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) { return smolbox::bench::Main(argc, argv); }
