#include "launch/host_files.h"

#include <sys/stat.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "test_support.h"

namespace smolvm_check {
namespace {

namespace fs = std::filesystem;

using smolbox::testing::TempDir;

// The directory read beneath, and a sibling of it outside.
class HostFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    elsewhere_.Write("secret", "host secret");
    beneath_.Write("sub/out.txt", "result");
  }
  TempDir beneath_{"host-files"};
  TempDir elsewhere_{"host-files-outside"};
  std::string dir_ = beneath_.path();
  std::string outside_ = elsewhere_.path();
};

TEST_F(HostFiles, reads_a_regular_file_beneath_the_directory) {
  EXPECT_EQ(ReadRegularFileBeneath(dir_, "sub/out.txt", 1024), "result");
  EXPECT_EQ(ReadRegularFileBeneath(dir_, "sub/out.txt", 3), "res");
}

TEST_F(HostFiles, refuses_a_symlinked_file_a_symlinked_directory_and_dotdot) {
  fs::create_symlink(outside_ + "/secret", dir_ + "/link");
  fs::create_directory_symlink(outside_, dir_ + "/linked_dir");
  EXPECT_EQ(ReadRegularFileBeneath(dir_, "link", 1024), std::nullopt);
  EXPECT_EQ(ReadRegularFileBeneath(dir_, "linked_dir/secret", 1024), std::nullopt);
  std::string escape = "../" + fs::path(outside_).filename().string() + "/secret";
  EXPECT_EQ(ReadRegularFileBeneath(dir_, escape, 1024), std::nullopt);
}

TEST_F(HostFiles, refuses_a_fifo_without_blocking) {
  ASSERT_EQ(mkfifo((dir_ + "/fifo").c_str(), 0644), 0);
  EXPECT_EQ(ReadRegularFileBeneath(dir_, "fifo", 1024), std::nullopt);
}

TEST_F(HostFiles, a_read_error_gives_what_was_read_instead_of_throwing) {
  // read(2) on a directory fails with EISDIR, as /proc/PID/cmdline fails with ESRCH when its
  // process exits mid-read.
  EXPECT_EQ(ReadUpTo(dir_), "");
  EXPECT_EQ(ReadUpTo(dir_ + "/missing"), "");
  EXPECT_EQ(ReadUpTo(dir_ + "/sub/out.txt"), "result");
}

}  // namespace
}  // namespace smolvm_check
