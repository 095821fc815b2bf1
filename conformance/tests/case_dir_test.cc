// CaseDir: where a case's mounts live on the host, and the tokens some of their names carry.
#include "battery/case_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

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

TEST(CaseDir, unsafe_outputs_are_links_special_files_and_set_id_files_anywhere_below) {
  TempDir out("case-dir-test");
  out.Write("plain.txt", "ok\n");
  out.Write("deep/also_plain.txt", "ok\n");
  ASSERT_EQ(symlink("/etc/hostname", (out.path() + "/link").c_str()), 0);
  ASSERT_EQ(symlink("/etc", (out.path() + "/deep/dir_link").c_str()), 0);
  ASSERT_EQ(mkfifo((out.path() + "/fifo").c_str(), 0644), 0);
  ASSERT_EQ(chmod(out.Write("suid", "x").c_str(), 04755), 0);
  ASSERT_EQ(chmod(out.Write("deep/sgid", "x").c_str(), 02755), 0);
  // A setgid directory is how shared directories keep their group, not an escalation.
  ASSERT_EQ(chmod((out.path() + "/deep").c_str(), 02755), 0);

  auto unsafe = UnsafeOutputs(out.path(), "out");
  std::sort(unsafe.begin(), unsafe.end());
  EXPECT_EQ(unsafe, (std::vector<std::string>{"out/deep/dir_link is a symlink", "out/deep/sgid is setgid",
                                              "out/fifo is a special file", "out/link is a symlink",
                                              "out/suid is setuid"}));
}

TEST(CaseDir, a_clean_output_directory_has_nothing_unsafe) {
  TempDir out("case-dir-test");
  out.Write("result.csv", "a,b\n");
  out.Write("nested/more.json", "{}");
  EXPECT_TRUE(UnsafeOutputs(out.path(), "out").empty());
  EXPECT_TRUE(UnsafeOutputs(out.path() + "/missing", "out").empty());
}

}  // namespace
}  // namespace smolvm_check
