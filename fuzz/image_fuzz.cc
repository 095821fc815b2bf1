// An image layer, any bytes, applied onto a fresh tree as `smolbox image import` applies one:
// whatever the tar holds (libarchive reads it, gzip and zstd included), the extraction must
// not crash, must not leave the tree (its directory holds nothing but the tree afterwards), and
// must keep to its budget.
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "beneath.h"
#include "fuzz_input.h"
#include "layer_extract.h"

namespace {

// One scratch directory for the whole run, which becomes the process's root: an extraction
// bug that wrote through an absolute path or climbed out would land there, not on the host,
// and be seen. The working directory stays outside, so libFuzzer's relative corpus and artifact
// paths still work. Each input gets a fresh rootfs/ in it. scripts/fuzz names the directory in
// FUZZ_IMAGE_SCRATCH, and removes it after the run (LeakSanitizer needs its /proc until exit).
int Scratch() {
  static int fd = [] {
    char temp[] = "/tmp/fuzz-image-XXXXXX";
    const char* given = std::getenv("FUZZ_IMAGE_SCRATCH");
    const char* made = given != nullptr ? given : mkdtemp(temp);
    if (made == nullptr) std::abort();
    std::string path = made;
    int flags = CLONE_NEWNS | (geteuid() == 0 ? 0 : CLONE_NEWUSER);
    // LeakSanitizer reads /proc at exit.
    std::string proc = path + "/proc";
    if (unshare(flags) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        (mkdir(proc.c_str(), 0555) != 0 && errno != EEXIST) ||
        mount("/proc", proc.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0 || chroot(path.c_str()) != 0) {
      std::perror("fuzz_image: confine to the scratch directory");
      std::abort();
    }
    return open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }();
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace smolbox;
  int scratch = Scratch();
  fuzz::Require(mkdirat(scratch, "rootfs", 0755) == 0, "a fresh rootfs can be made");
  int rootfs = openat(scratch, "rootfs", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int blob = memfd_create("layer", MFD_CLOEXEC);
  fuzz::Require(rootfs >= 0 && blob >= 0 && write(blob, data, size) == static_cast<ssize_t>(size), "the input is in place");
  constexpr int64_t kBytes = 4 << 20;
  image::LayerBudget budget{kBytes, 2000};
  std::vector<std::string> warnings;
  (void)image::ApplyLayer(blob, rootfs, "fuzz layer", budget, warnings);
  fuzz::Require(budget.bytes_left >= 0, "the extraction keeps to its size budget");
  auto names = image::ListNames(scratch);
  if (names) std::sort(names->begin(), names->end());
  fuzz::Require(names && *names == std::vector<std::string>{"proc", "rootfs"}, "nothing lands beside the tree");
  fuzz::Require(image::RemoveTree(scratch, "rootfs").has_value(), "the tree can be removed");
  close(blob);
  close(rootfs);
  return 0;
}
