// Volumes: ro stays read-only, rw round-trips, and nothing but plain files and directories
// crosses back to the host.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "smolbox_runner.h"
#include "test_support.h"

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

// A host directory whose name says something, below a path that says something too.
struct NamedSource {
  TempDir dir;
  std::string token = RandomToken();
  std::string path = dir.path() + "/project-" + token;

  NamedSource() {
    std::filesystem::create_directory(path);
    WriteFile(path + "/data.csv", "a,b\n");
  }
};

std::string Mountinfo(const Invocation& run) { return run.result.value("stdout", ""); }

bool ShowsHostPath(const std::string& mountinfo, const NamedSource& source) {
  return mountinfo.find(source.token) != std::string::npos ||
         mountinfo.find(source.dir.path()) != std::string::npos;
}

TEST(Volumes, mountinfo_shows_no_part_of_a_ro_volumes_host_path) {
  NamedSource source;
  auto run = RunJson({"-v", source.path + ":/in:ro"},
                     {"/bin/cat", "/proc/self/mountinfo", "/in/data.csv"});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  std::string out = Mountinfo(run);
  EXPECT_FALSE(ShowsHostPath(out, source)) << out;
  EXPECT_NE(out.find(" / /in ro,"), std::string::npos) << out;
  EXPECT_NE(out.find("a,b\n"), std::string::npos) << out;
  EXPECT_EQ(run.result["warnings"], nlohmann::json::array()) << run.out;
}

TEST(Volumes, mountinfo_shows_only_the_file_name_of_a_ro_file_volume) {
  NamedSource source;
  auto run = RunJson({"-v", source.path + "/data.csv:/in/input.csv:ro"},
                     {"/bin/cat", "/proc/self/mountinfo", "/in/input.csv"});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  std::string out = Mountinfo(run);
  EXPECT_FALSE(ShowsHostPath(out, source)) << out;
  EXPECT_NE(out.find(" /data.csv /in/input.csv ro,"), std::string::npos) << out;
  EXPECT_NE(out.find("a,b\n"), std::string::npos) << out;
}

TEST(Volumes, mountinfo_shows_no_part_of_a_rw_volumes_host_path) {
  NamedSource source;
  auto run = RunJson({"-v", source.path + ":/out:rw"}, {"/bin/cat", "/proc/self/mountinfo"});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  EXPECT_FALSE(ShowsHostPath(Mountinfo(run), source)) << Mountinfo(run);
}

TEST(Volumes, mountinfo_hides_a_ro_volume_from_an_unprivileged_runtime_too) {
  NamedSource source;
  chmod(source.path.c_str(), 0755);
  auto run = RunSmolbox({"run", "--json", "--backend", "ns", "-v", source.path + ":/in:ro", "--",
                         "/bin/cat", "/proc/self/mountinfo", "/in/data.csv"},
                        {}, 65534);
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  std::string out = Mountinfo(run);
  EXPECT_FALSE(ShowsHostPath(out, source)) << out;
  EXPECT_NE(out.find("a,b\n"), std::string::npos) << out;
}

// Overlayfs sees only the source's own filesystem, so a volume with a mount inside is bound
// as it is, which shows its path; the result says so.
TEST(Volumes, a_ro_volume_with_a_mount_inside_is_bound_as_is_with_a_warning) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to mount inside the volume";
  NamedSource source;
  std::string inner = source.path + "/inner";
  std::filesystem::create_directory(inner);
  ASSERT_EQ(mount("tmpfs", inner.c_str(), "tmpfs", 0, "size=64k"), 0) << strerror(errno);
  WriteFile(inner + "/mounted.txt", "mounted\n");
  auto run = RunJson({"-v", source.path + ":/in:ro"}, {"/bin/cat", "/in/inner/mounted.txt"});
  umount2(inner.c_str(), MNT_DETACH);
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  EXPECT_EQ(run.result["stdout"], "mounted\n");
  std::string warnings = run.result["warnings"].dump();
  std::string shown = "volume /in: bound as is, so /proc/self/mountinfo in the sandbox shows";
  EXPECT_NE(warnings.find(shown), std::string::npos) << warnings;
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
