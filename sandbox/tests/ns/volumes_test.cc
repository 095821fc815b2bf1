// Volumes: ro stays read-only, rw round-trips, and nothing but plain files and directories
// crosses back to the host.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "smolbox_runner.h"

namespace smolbox::testing {
namespace {

constexpr const char* kPython = "/usr/bin/python3";
constexpr const char* kNode = "/usr/bin/node";

TEST(Volumes, a_write_to_a_ro_volume_fails_in_python_and_node) {
  TempDir dir;
  dir.Write("input.txt", "original");
  auto py = RunJson({"-v", dir.path() + ":/in:ro"},
                    {kPython, "-c", "try:\n  open('/in/input.txt','w').write('x')\n  print('wrote')\nexcept OSError as e:\n  print('denied', e.errno)"});
  EXPECT_EQ(py.result["stdout"], "denied 30\n") << py.out << py.err;  // EROFS
  auto js = RunJson({"-v", dir.path() + ":/in:ro"},
                    {kNode, "-e", "try{require('fs').writeFileSync('/in/new','x');console.log('wrote')}catch(e){console.log(e.code)}"});
  EXPECT_EQ(js.result["stdout"], "EROFS\n") << js.out << js.err;
  EXPECT_EQ(ReadFileOrEmpty(dir.path() + "/input.txt"), "original");
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/new"));
}

TEST(Volumes, a_ro_volume_is_readable) {
  TempDir dir;
  dir.Write("data.csv", "a,b\n1,2\n");
  auto run = RunJson({"-v", dir.path() + ":/in:ro"}, {"/bin/cat", "/in/data.csv"});
  EXPECT_EQ(run.result["stdout"], "a,b\n1,2\n") << run.out << run.err;
}

TEST(Volumes, a_rw_volume_round_trips_new_changed_and_deleted_files) {
  TempDir dir;
  dir.Write("keep.txt", "keep");
  dir.Write("change.txt", "before");
  dir.Write("delete.txt", "bye");
  auto run = RunJson({"-v", dir.path() + ":/out"},
                     {"/bin/sh", "-c", "cat /out/keep.txt; echo after > /out/change.txt; rm /out/delete.txt; "
                                       "mkdir -p /out/sub && echo new > /out/sub/new.txt"});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  EXPECT_EQ(run.result["stdout"], "keep");
  EXPECT_EQ(ReadFileOrEmpty(dir.path() + "/keep.txt"), "keep");
  EXPECT_EQ(ReadFileOrEmpty(dir.path() + "/change.txt"), "after\n");
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/delete.txt"));
  EXPECT_EQ(ReadFileOrEmpty(dir.path() + "/sub/new.txt"), "new\n");
}

TEST(Volumes, rw_changes_are_copied_back_even_after_a_timeout) {
  TempDir dir;
  auto run = RunJson({"-v", dir.path() + ":/out", "--timeout", "1s"},
                     {"/bin/sh", "-c", "echo partial > /out/result.txt; while :; do :; done"});
  EXPECT_EQ(run.result["status"], "timeout");
  EXPECT_EQ(ReadFileOrEmpty(dir.path() + "/result.txt"), "partial\n");
}

TEST(Volumes, planted_symlinks_fifos_devices_and_setuid_bits_do_not_reach_the_host) {
  TempDir dir;
  TempDir victim;
  std::string script =
      "cd /out && ln -s " + victim.path() + " escape && ln -s /etc/passwd passwd_link && mkfifo fifo && "
      "echo x > suid && chmod 4755 suid && echo y > linked && ln linked hard && "
      "mkdir d && ln -s " + victim.path() + " d/inner; echo done";
  auto run = RunJson({"-v", dir.path() + ":/out"}, {"/bin/sh", "-c", script});
  ASSERT_EQ(run.result["stdout"], "done\n") << run.out << run.err;
  for (const char* name : {"escape", "passwd_link", "fifo", "d/inner", "hard", "linked"}) {
    struct stat st{};
    EXPECT_NE(lstat((dir.path() + "/" + name).c_str(), &st), 0) << name << " crossed back";
  }
  struct stat st{};
  ASSERT_EQ(lstat((dir.path() + "/suid").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07000, 0u);
  EXPECT_TRUE(std::filesystem::is_empty(victim.path()));
  std::string warnings = run.result["warnings"].dump();
  EXPECT_NE(warnings.find("symlink escape"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("FIFO fifo"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("hardlink"), std::string::npos) << warnings;
}

TEST(Volumes, a_planted_directory_symlink_is_not_followed_by_the_copy_back) {
  TempDir dir;
  TempDir victim;
  // The host side has a real directory `sub`; the sandbox replaces it with a symlink to the
  // victim and writes through it. The copy-back must not follow that link.
  std::filesystem::create_directory(dir.path() + "/sub");
  std::string script = "cd /out && rm -r sub && ln -s " + victim.path() + " sub && echo pwned > sub/owned 2>/dev/null; "
                       "mkdir -p real && echo ok > real/file; echo done";
  auto run = RunJson({"-v", dir.path() + ":/out"}, {"/bin/sh", "-c", script});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  EXPECT_TRUE(std::filesystem::is_empty(victim.path()));
  EXPECT_EQ(ReadFileOrEmpty(dir.path() + "/real/file"), "ok\n");
}

TEST(Volumes, rw_volume_writes_count_against_the_storage_quota) {
  TempDir dir;
  auto run = RunJson({"-v", dir.path() + ":/out", "--storage", "16M"},
                     {"/bin/sh", "-c", "dd if=/dev/zero of=/out/big bs=1M count=64 2>&1; echo rc=$?"});
  EXPECT_NE(run.result["stdout"].get<std::string>().find("No space left"), std::string::npos) << run.out;
  struct stat st{};
  if (stat((dir.path() + "/big").c_str(), &st) == 0) {
    EXPECT_LE(st.st_size, 16 << 20);
  }
}

}  // namespace
}  // namespace smolbox::testing
