// CaseDir: where a case's mounts live on the host, and the tokens some of their names carry.
#include "battery/case_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace smolvm_check {
namespace {

namespace fs = std::filesystem;

class WorkRoot {
 public:
  WorkRoot() {
    char templ[] = "/tmp/case-dir-test-XXXXXX";
    path_ = mkdtemp(templ);
  }
  ~WorkRoot() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

Case TwoMounts() {
  Case c;
  c.id = "info.volume_source.python";
  c.mounts = {CaseMount{"in", "/in", true, {{"data.txt", "planted\n"}}, true},
              CaseMount{"out", "/out", false, {}, false}};
  return c;
}

TEST(CaseDir, a_path_canary_mount_carries_its_token_in_its_directory_name) {
  WorkRoot root;
  auto dir = CaseDir::Create(root.path(), TwoMounts());
  ASSERT_TRUE(dir) << dir.error().ToString();
  auto tokens = dir->PathTokens();
  ASSERT_EQ(tokens.size(), 1u);
  const std::string& token = tokens.at("mount_path:in");
  EXPECT_TRUE(token.starts_with("SMOLVM-CANARY-")) << token;
  EXPECT_EQ(dir->MountDir("in"), dir->root() + "/mounts/in-" + token);
  std::ifstream planted(dir->MountDir("in") + "/data.txt");
  std::string content((std::istreambuf_iterator<char>(planted)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "planted\n");
}

TEST(CaseDir, other_mounts_keep_their_plain_names) {
  WorkRoot root;
  auto dir = CaseDir::Create(root.path(), TwoMounts());
  ASSERT_TRUE(dir) << dir.error().ToString();
  EXPECT_EQ(dir->MountDir("out"), dir->root() + "/mounts/out");
  EXPECT_TRUE(fs::is_directory(dir->MountDir("out")));
}

TEST(CaseDir, each_case_gets_a_fresh_token) {
  WorkRoot root;
  auto first = CaseDir::Create(root.path(), TwoMounts());
  auto second = CaseDir::Create(root.path(), TwoMounts());
  ASSERT_TRUE(first && second);
  EXPECT_NE(first->PathTokens(), second->PathTokens());
}

}  // namespace
}  // namespace smolvm_check
