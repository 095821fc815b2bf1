// CaseDir: where a case's mounts live on the host, and the tokens some of their names carry.
#include "battery/case_dir.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "test_support.h"

namespace smolvm_check {
namespace {

namespace fs = std::filesystem;

using smolbox::testing::ReadFileOrEmpty;
using smolbox::testing::TempDir;

Case TwoMounts() {
  Case c;
  c.id = "info.volume_source.python";
  c.mounts = {CaseMount{"in", "/in", true, {{"data.txt", "planted\n"}}, true},
              CaseMount{"out", "/out", false, {}, false}};
  return c;
}

TEST(CaseDir, a_path_canary_mount_carries_its_token_in_its_directory_name) {
  TempDir root("case-dir-test");
  auto dir = CaseDir::Create(root.path(), TwoMounts());
  ASSERT_TRUE(dir) << dir.error().ToString();
  auto tokens = dir->PathTokens();
  ASSERT_EQ(tokens.size(), 1u);
  const std::string& token = tokens.at("mount_path:in");
  EXPECT_TRUE(token.starts_with("SMOLVM-CANARY-")) << token;
  EXPECT_EQ(dir->MountDir("in"), dir->root() + "/mounts/in-" + token);
  EXPECT_EQ(ReadFileOrEmpty(dir->MountDir("in") + "/data.txt"), "planted\n");
}

TEST(CaseDir, other_mounts_keep_their_plain_names) {
  TempDir root("case-dir-test");
  auto dir = CaseDir::Create(root.path(), TwoMounts());
  ASSERT_TRUE(dir) << dir.error().ToString();
  EXPECT_EQ(dir->MountDir("out"), dir->root() + "/mounts/out");
  EXPECT_TRUE(fs::is_directory(dir->MountDir("out")));
}

TEST(CaseDir, each_case_gets_a_fresh_token) {
  TempDir root("case-dir-test");
  auto first = CaseDir::Create(root.path(), TwoMounts());
  auto second = CaseDir::Create(root.path(), TwoMounts());
  ASSERT_TRUE(first && second);
  EXPECT_NE(first->PathTokens(), second->PathTokens());
}

}  // namespace
}  // namespace smolvm_check
