// The disk storage is a copy of a cached, mkfs-made template: a damaged or planted template
// must never reach a run, and no run may see another's data.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "smolbox_runner.h"
#include "test_support.h"

namespace smolbox::testing {
namespace {

// A size no other test uses, so that its template is this file's alone.
constexpr const char* kStorage = "24M";
constexpr const char* kTemplate = "/run/smolbox/cache/ext4-24m-3072i.img";
constexpr off_t kMagicOffset = 1024 + 0x38;

// Writes a file in the storage and reads it back: the run works on whatever template it found.
void ExpectStorageWorks() {
  auto run = RunSmolbox({"run", "--storage", kStorage, "--", "/bin/sh", "-c",
                         "echo written > /tmp/f && cat /tmp/f && echo more > /work/g && cat /work/g"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "written\nmore\n") << run.err;
}

// Our own 0600 regular file with the ext4 magic: the template a run left behind is sound.
void ExpectSoundTemplate() {
  struct stat st{};
  ASSERT_EQ(lstat(kTemplate, &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_size, 24 << 20);
  std::ifstream in(kTemplate, std::ios::binary);
  in.seekg(kMagicOffset);
  unsigned char magic[2] = {};
  in.read(reinterpret_cast<char*>(magic), 2);
  EXPECT_EQ(magic[0] | magic[1] << 8, 0xEF53);
}

class StorageTemplate : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "disk-backed storage needs root";
    // A first run makes the template.
    ExpectStorageWorks();
    ExpectSoundTemplate();
  }
};

TEST_F(StorageTemplate, a_template_with_a_broken_superblock_is_rebuilt_and_the_run_works) {
  {
    std::fstream out(kTemplate, std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(kMagicOffset);
    out.write("\0\0", 2);
  }
  ExpectStorageWorks();
  ExpectSoundTemplate();
}

TEST_F(StorageTemplate, a_truncated_template_is_rebuilt_and_the_run_works) {
  ASSERT_EQ(truncate(kTemplate, 4096), 0);
  ExpectStorageWorks();
  ExpectSoundTemplate();
}

TEST_F(StorageTemplate, a_symlink_in_place_of_the_template_is_not_followed) {
  TempDir dir;
  std::string decoy = dir.Write("decoy", "not a filesystem\n");
  ASSERT_EQ(unlink(kTemplate), 0);
  ASSERT_EQ(symlink(decoy.c_str(), kTemplate), 0);
  ExpectStorageWorks();
  ExpectSoundTemplate();
  EXPECT_EQ(ReadFileOrEmpty(decoy), "not a filesystem\n");
}

TEST(Storage, templates_of_many_sizes_keep_only_the_eight_used_last) {
  if (geteuid() != 0) GTEST_SKIP() << "disk-backed storage needs root";
  std::vector<std::string> sizes;
  for (int mib = 40; mib < 52; ++mib) {
    sizes.push_back(std::to_string(mib) + "M");
    auto run = RunSmolbox({"run", "--storage", sizes.back(), "--", "/bin/true"});
    ASSERT_EQ(run.exit_code, 0) << run.err;
  }
  std::vector<std::string> kept;
  for (const auto& entry : std::filesystem::directory_iterator("/run/smolbox/cache")) {
    std::string name = entry.path().filename();
    if (name.starts_with("ext4-") && name.ends_with(".img")) kept.push_back(name);
  }
  EXPECT_EQ(kept.size(), 8u) << ::testing::PrintToString(kept);
  EXPECT_TRUE(std::filesystem::exists("/run/smolbox/cache/ext4-51m-" + std::to_string(51 * 128) + "i.img"))
      << "the template used last was removed: " << ::testing::PrintToString(kept);
}

TEST(Storage, a_template_whose_inode_count_mkfs_rounded_is_reused_not_rebuilt) {
  if (geteuid() != 0) GTEST_SKIP() << "disk-backed storage needs root";
  // 65 MiB: 8320 inodes asked, 8352 made.
  const std::string path = "/run/smolbox/cache/ext4-65m-8320i.img";
  auto inode_after_a_run = [&] {
    auto run = RunSmolbox({"run", "--storage", "65M", "--", "/bin/true"});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    struct stat st{};
    return lstat(path.c_str(), &st) == 0 ? st.st_ino : 0;
  };
  ino_t first = inode_after_a_run();
  ASSERT_NE(first, 0u) << "no template left by the run";
  EXPECT_EQ(inode_after_a_run(), first) << "the template was rebuilt";
}

TEST(Storage, two_runs_never_share_files_or_a_filesystem_identity) {
  auto first = RunSmolbox({"run", "--", "/bin/sh", "-c",
                           "echo secret > /tmp/left-behind && echo secret > /work/left-behind && "
                           "mkdir /dev/shm/d && stat -f -c %i /tmp"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto second = RunSmolbox({"run", "--", "/bin/sh", "-c", "ls -A /tmp /work /dev/shm; stat -f -c %i /tmp"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.out.find("left-behind"), std::string::npos) << second.out;
  EXPECT_EQ(second.out.find("\nd\n"), std::string::npos) << second.out;
  // The filesystem id (from the ext4 UUID) is each run's own, as mkfs would have made it.
  std::string first_id = first.out, second_id = second.out.substr(second.out.rfind('\n', second.out.size() - 2) + 1);
  EXPECT_NE(first_id, second_id);
}

}  // namespace
}  // namespace smolbox::testing
