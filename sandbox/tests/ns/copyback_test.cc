// Copy-back loses only what a limit refuses: a tree nested past the limit is skipped by path,
// and every output beside it still reaches the host.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "smolbox_runner.h"
#include "test_support.h"

namespace smolbox::testing {
namespace {

// 300 levels under out/deep, a file near its top and one at its bottom, and 31 files beside it
// whose names sort after "deep", so a walk that stopped at the deep tree would lose them.
constexpr const char* kDeepTreeAndOutputs =
    "cd /out; d=deep; i=0; while [ $i -lt 300 ]; do d=$d/d; i=$((i+1)); done; mkdir -p $d;"
    "echo near > deep/d/d/near.txt; echo far > $d/far.txt;"
    "i=1; while [ $i -le 31 ]; do echo $i > f$i.txt; i=$((i+1)); done";

TEST(CopyBack, a_tree_nested_past_the_limit_is_skipped_and_every_other_output_comes_back) {
  TempDir dir;
  auto run = RunJson({"-v", dir.path() + ":/out:rw"}, {"/bin/sh", "-c", kDeepTreeAndOutputs});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  for (int i = 1; i <= 31; ++i) {
    EXPECT_EQ(ReadFileOrEmpty(dir.path() + "/f" + std::to_string(i) + ".txt"), std::to_string(i) + "\n") << i;
  }
  EXPECT_EQ(ReadFileOrEmpty(dir.path() + "/deep/d/d/near.txt"), "near\n");
  std::string warnings = run.result["warnings"].dump();
  EXPECT_NE(warnings.find("mounts[0]: deep/d/d/"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("nested deeper than 256 levels"), std::string::npos) << warnings;
  EXPECT_EQ(warnings.find("copy-back stopped"), std::string::npos) << warnings;
}

}  // namespace
}  // namespace smolbox::testing
