// Another local user must not take over or spy on smolbox's state. An unprivileged smolbox with
// no $XDG_RUNTIME_DIR keeps its state in /tmp/smolbox-UID, where anyone may create that name
// first; with one, in $XDG_RUNTIME_DIR/smolbox. Here uid kAttacker plants what it can in those
// places, and smolbox run as uid kVictim must refuse them, naming the path, without following a
// link, writing anything into them, or hanging on a FIFO. Root's own state dir gets the same
// plants, where only a broken host would let them be made.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "smolbox_runner.h"
#include "test_support.h"

namespace smolbox::testing {
namespace {

constexpr uid_t kAttacker = 65000;
constexpr uid_t kVictim = 65001;
const std::string kVictimState = "/tmp/smolbox-" + std::to_string(kVictim);

// The victim's default state dir, removed before and after each test whatever it is.
class PlantedStateDir : public ::testing::Test {
 protected:
  void SetUp() override { Clear(); }
  void TearDown() override { Clear(); }
  static void Clear() {
    std::error_code ignored;
    std::filesystem::remove_all(kVictimState, ignored);
  }
};

Invocation RunAsVictim(const std::vector<std::string>& env = {}) {
  return RunSmolbox({"run", "--json", "--backend", "ns", "--", "/bin/echo", "ran"}, env, kVictim);
}

bool IsEmptyDir(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_empty(path, ec) && !ec;
}

TEST_F(PlantedStateDir, a_dir_another_user_made_first_is_refused_and_nothing_is_written_into_it) {
  ASSERT_EQ(mkdir(kVictimState.c_str(), 0777), 0);
  ASSERT_EQ(chown(kVictimState.c_str(), kAttacker, kAttacker), 0);
  ASSERT_EQ(chmod(kVictimState.c_str(), 0777), 0);  // the victim could write here: it must not
  Invocation run = RunAsVictim();
  EXPECT_EQ(run.exit_code, 125) << run.out << run.err;
  EXPECT_NE((run.out + run.err).find(kVictimState), std::string::npos) << run.out << run.err;
  EXPECT_NE((run.out + run.err).find("not a directory owned by this user"), std::string::npos) << run.out << run.err;
  EXPECT_TRUE(IsEmptyDir(kVictimState)) << "smolbox wrote into another user's directory";
}

TEST_F(PlantedStateDir, a_symlink_planted_in_its_place_is_not_followed) {
  TempDir scratch("hostile-host");
  std::string target = scratch.path() + "/victims-own";
  ASSERT_EQ(mkdir(target.c_str(), 0700), 0);
  ASSERT_EQ(chown(target.c_str(), kVictim, kVictim), 0);  // even a dir the victim owns
  chmod(scratch.path().c_str(), 0755);
  ASSERT_EQ(symlink(target.c_str(), kVictimState.c_str()), 0);
  ASSERT_EQ(lchown(kVictimState.c_str(), kAttacker, kAttacker), 0);
  Invocation run = RunAsVictim();
  EXPECT_EQ(run.exit_code, 125) << run.out << run.err;
  EXPECT_NE((run.out + run.err).find(kVictimState), std::string::npos) << run.out << run.err;
  EXPECT_TRUE(IsEmptyDir(target)) << "smolbox followed the planted link";
}

TEST_F(PlantedStateDir, a_fifo_in_its_place_is_refused_without_hanging) {
  ASSERT_EQ(mkfifo(kVictimState.c_str(), 0666), 0);
  ASSERT_EQ(chown(kVictimState.c_str(), kVictim, kVictim), 0);
  auto started = std::chrono::steady_clock::now();
  Invocation run = RunAsVictim();
  EXPECT_EQ(run.exit_code, 125) << run.out << run.err;
  EXPECT_NE((run.out + run.err).find(kVictimState), std::string::npos) << run.out << run.err;
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30));
}

TEST(HostileHost, a_smolbox_dir_another_user_made_in_a_shared_runtime_dir_is_refused) {
  // $XDG_RUNTIME_DIR pointed at a directory others can write (a sticky, world-writable one).
  TempDir shared("hostile-runtime");
  ASSERT_EQ(chmod(shared.path().c_str(), 01777), 0);
  std::string planted = shared.path() + "/smolbox";
  ASSERT_EQ(mkdir(planted.c_str(), 0777), 0);
  ASSERT_EQ(chown(planted.c_str(), kAttacker, kAttacker), 0);
  ASSERT_EQ(chmod(planted.c_str(), 0777), 0);
  Invocation run = RunAsVictim({"XDG_RUNTIME_DIR=" + shared.path()});
  EXPECT_EQ(run.exit_code, 125) << run.out << run.err;
  EXPECT_NE((run.out + run.err).find(planted), std::string::npos) << run.out << run.err;
  EXPECT_NE((run.out + run.err).find("not a directory owned by this user"), std::string::npos) << run.out << run.err;
  EXPECT_TRUE(IsEmptyDir(planted)) << "smolbox wrote into another user's directory";
}

// As root, the state is /run/smolbox, in a directory only root may write: on a sound host no
// other user can plant anything there. On one where someone did (here a tmpfs over /run, in a
// private mount namespace), each plant is refused as it is for a user, naming the path, and
// nothing is followed or written; once it is gone, root's state dir is made anew, 0711.
TEST(HostileHost, as_root_a_planted_run_smolbox_is_refused_and_never_followed_or_written) {
  PrivateMountScript s;
  auto script = s.Run(R"sh(
    mount -t tmpfs -o mode=0755 tmpfs /run || exit 90
    try() { timeout 30 "$SMOLBOX" run --json -- /bin/echo ran > "$DIR/$1.json" 2> "$DIR/$1.err"; echo $? > "$DIR/$1.rc"; }
    mkdir -m 0777 /run/smolbox && chown 65000:65000 /run/smolbox && chmod 0777 /run/smolbox
    try dir; ls -A /run/smolbox > "$DIR/dir.left"; rm -rf /run/smolbox
    mkdir -m 0700 "$DIR/target" && ln -s "$DIR/target" /run/smolbox && chown -h 65000:65000 /run/smolbox
    try link; ls -A "$DIR/target" > "$DIR/link.left"; rm /run/smolbox
    mkfifo -m 0666 /run/smolbox && try fifo; rm /run/smolbox
    try clean; stat -c '%u %a %F' /run/smolbox > "$DIR/clean.stat"
  )sh");
  ASSERT_EQ(script.exit_code, 0) << script.out << script.err;
  for (const char* plant : {"dir", "link", "fifo"}) {
    std::string said = s.Text(std::string(plant) + ".json") + s.Text(std::string(plant) + ".err");
    EXPECT_EQ(s.Text(std::string(plant) + ".rc"), "125\n") << plant << ": " << said;
    EXPECT_NE(said.find("/run/smolbox"), std::string::npos) << plant << ": " << said;
    EXPECT_NE(said.find("not a directory owned by this user"), std::string::npos) << plant << ": " << said;
  }
  EXPECT_EQ(s.Text("dir.left"), "") << "root wrote into another user's directory";
  EXPECT_EQ(s.Text("link.left"), "") << "root followed the planted link";
  EXPECT_EQ(s.Json("clean.json").value("stdout", ""), "ran\n") << s.Text("clean.json") << s.Text("clean.err");
  EXPECT_EQ(s.Text("clean.stat"), "0 711 directory\n");
}

TEST_F(PlantedStateDir, the_victim_runs_again_once_the_plant_is_gone) {
  Invocation run = RunAsVictim();
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(run.result.value("stdout", ""), "ran\n") << run.out << run.err;
  struct stat st{};
  ASSERT_EQ(lstat(kVictimState.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_uid, kVictim);
  EXPECT_EQ(st.st_mode & 0777, 0711u);
}

}  // namespace
}  // namespace smolbox::testing
