// Real podman running containers through smolbox-oci: `podman run --runtime`, on a busybox image
// imported into a podman store of the test's own, rootful and as an unprivileged uid.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "oci_bundle.h"
#include "smolbox_runner.h"

namespace smolbox::testing {
namespace {

// podman with a store, run dir and runtime of the test's own, so nothing it makes outlives it.
class Podman {
 public:
  Podman() {
    OciBundle bundle;  // its rootfs, as an image
    ProgramRun tar =
        RunProgram({"tar", "-C", bundle.rootfs(), "-cf", dir_.path() + "/rootfs.tar", "."});
    imported_ =
        tar.exit_code == 0 && Call({"import", dir_.path() + "/rootfs.tar", kImage}).exit_code == 0;
  }
  ~Podman() {
    Call({"rm", "--all", "--force", "--time", "0"});
    Call({"rmi", "--all", "--force"});
    // Its overlay store stays mounted (the driver's own private mount). Not
    // `podman system reset`, which also clears /run/libpod, shared with every podman of the host.
    UnmountEverythingUnder(dir_.path());
  }

  bool imported() const { return imported_; }

  ProgramRun Call(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {"podman",
                                     "--root",
                                     dir_.path() + "/storage",
                                     "--runroot",
                                     dir_.path() + "/run",
                                     "--cgroup-manager",
                                     "cgroupfs",
                                     "--runtime",
                                     SmolboxPath() + "-oci"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProgram(argv);
  }

  // podman run --rm IMAGE ARGS..., with options before the image.
  ProgramRun Run(const std::vector<std::string>& options,
                 const std::vector<std::string>& command) const {
    // No network of podman's: its default (a CNI bridge with NAT) would change the host's
    // firewall and reach off this machine.
    std::vector<std::string> args = {"run", "--rm", "--pull", "never", "--network", "none"};
    args.insert(args.end(), options.begin(), options.end());
    args.push_back(kImage);
    args.insert(args.end(), command.begin(), command.end());
    return Call(args);
  }

  static constexpr const char* kImage = "localhost/smolbox-oci-busybox:test";

  // podman run -d --name NAME: a shell that stays (it does not exec its last command), with
  // token as its $0, for CountProcessesWith.
  ProgramRun StartSleeper(const std::string& name, const std::string& token) const {
    return Call({"run", "-d", "--name", name, "--pull", "never", "--network", "none", kImage,
                 "/bin/sh", "-c", "sleep 600; :", token});
  }

 private:
  TempDir dir_{"oci-podman"};
  bool imported_ = false;
};

class OciPodman : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!OnPath("podman")) GTEST_SKIP() << "podman is not installed";
    podman_ = std::make_unique<Podman>();
    ASSERT_TRUE(podman_->imported()) << "podman import of the busybox rootfs failed";
  }
  std::unique_ptr<Podman> podman_;
};

TEST_F(OciPodman, runs_a_container_in_a_smolbox_sandbox_with_its_image_and_exit_code) {
  auto run = podman_->Run(
      {"--hostname", "box1"},
      {"/bin/sh", "-c",
       "echo $(hostname) $(id -u) $(cat /etc/shadow); grep -E '^(CapEff|NoNewPrivs|Seccomp):' "
       "/proc/self/status | tr -s '\\t' ' '; exit 3"});
  EXPECT_EQ(run.exit_code, 3) << run.err;
  // Root of the container, with no capability, no_new_privs and smolbox's seccomp filter: what
  // runc would not give a root container.
  EXPECT_EQ(run.out, "box1 0 root-only\nCapEff: 0000000000000000\nNoNewPrivs: 1\nSeccomp: 2\n")
      << run.err;
}

// The vm backend through podman: the annotations ask for it, and the container runs in a guest
// (under emulation here).
TEST_F(OciPodman, an_annotation_runs_the_container_in_a_microvm) {
  auto run =
      podman_->Run({"--annotation", "io.smolbox.backend=vm", "--annotation", "io.smolbox.accel=tcg",
                    "--memory", "256m", "--hostname", "vmbox"},
                   {"/bin/sh", "-c", "grep -c rdinit=/init /proc/cmdline; hostname; exit 4"});
  EXPECT_EQ(run.exit_code, 4) << run.err;
  EXPECT_EQ(run.out, "1\nvmbox\n") << run.err;
}

TEST_F(OciPodman, the_engines_memory_pids_and_network_options_hold) {
  auto memory = podman_->Run(
      {"--memory", "32m"},
      {"/bin/sh", "-c", "x=$(head -c 67108864 /dev/zero | tr '\\0' a); echo survived"});
  EXPECT_EQ(memory.exit_code, 137) << memory.out << memory.err;
  auto pids = podman_->Run(
      {"--pids-limit", "20"},
      {"/bin/sh", "-c", "for i in $(seq 40); do sleep 30 & done 2>/dev/null; echo spawned"});
  EXPECT_NE(pids.out, "spawned\n") << "40 processes started under --pids-limit 20";
  auto none =
      podman_->Run({}, {"/bin/sh", "-c", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"});
  EXPECT_EQ(none.exit_code, 0) << none.err;
  EXPECT_EQ(none.out, "lo\n");
}

TEST_F(OciPodman, a_terminal_is_a_pty_from_the_console_socket) {
  auto tty = podman_->Run({"-t"}, {"echo", "on-a-tty"});
  EXPECT_EQ(tty.exit_code, 0) << tty.err;
  EXPECT_EQ(tty.out, "on-a-tty\r\n") << "a pty's line discipline turns \\n into \\r\\n";
}

TEST_F(OciPodman, stop_and_rm_force_end_a_running_container_and_leave_nothing) {
  std::string token = RandomToken();
  auto started = podman_->StartSleeper("s1", token);
  ASSERT_EQ(started.exit_code, 0) << started.err;
  EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(token) > 0; }, std::chrono::seconds(30)));
  auto stopped = podman_->Call({"stop", "--time", "2", "s1"});
  EXPECT_EQ(stopped.exit_code, 0) << stopped.err;
  EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(token) == 0; }, std::chrono::seconds(30)));
  auto inspected =
      podman_->Call({"inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", "s1"});
  EXPECT_EQ(inspected.out, "exited 143\n") << "SIGTERM ended it: " << inspected.err;
  EXPECT_EQ(podman_->Call({"rm", "s1"}).exit_code, 0);

  std::string second = RandomToken();
  ASSERT_EQ(podman_->StartSleeper("s2", second).exit_code, 0);
  EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(second) > 0; }, std::chrono::seconds(30)));
  auto removed = podman_->Call({"rm", "--force", "--time", "0", "s2"});
  EXPECT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(second) == 0; }, std::chrono::seconds(30)));
}

TEST_F(OciPodman, exec_runs_beside_the_containers_process_with_its_confinement_and_exit_code) {
  std::string token = RandomToken();
  ASSERT_EQ(podman_->StartSleeper("e1", token).exit_code, 0);
  EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(token) > 0; }, std::chrono::seconds(30)));
  auto exec = podman_->Call(
      {"exec", "--user", "1000:1000", "--env", "FROM_EXEC=yes", "e1", "/bin/sh", "-c",
       "echo $FROM_EXEC $(id -u); grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status | "
       "tr -s '\\t' ' '; exit 5"});
  EXPECT_EQ(exec.exit_code, 5) << exec.err;
  EXPECT_EQ(exec.out, "yes 1000\nCapEff: 0000000000000000\nNoNewPrivs: 1\nSeccomp: 2\n")
      << exec.err;
  auto tty = podman_->Call({"exec", "-t", "e1", "echo", "on-a-tty"});
  EXPECT_EQ(tty.exit_code, 0) << tty.err;
  EXPECT_EQ(tty.out, "on-a-tty\r\n");
  EXPECT_GT(CountProcessesWith(token), 0) << "the container's process goes on";
  EXPECT_EQ(podman_->Call({"rm", "--force", "--time", "0", "e1"}).exit_code, 0);
  EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(token) == 0; }, std::chrono::seconds(30)));
}

// podman as an unprivileged host uid, as a user without root runs it: its runtime runs as root
// of podman's user namespace, which maps that uid alone, and smolbox-oci takes its rootless paths
// there (a sandbox that maps the one id, storage in a size-capped tmpfs, no idmapped rootfs).
class RootlessPodman {
 public:
  static constexpr const char* kUid = "65021";  // none of the machine's, and not the battery's

  RootlessPodman() {
    // podman refuses a runroot (DIR/run/s) over 50 characters.
    std::filesystem::create_directories(dir_);
    chmod(dir_.c_str(), 0711);
    for (const char* sub : {"/home", "/run"}) {
      std::string path = dir_ + sub;
      mkdir(path.c_str(), 0700);
      chown(path.c_str(), 65021, 65021);
    }
    OciBundle bundle;
    std::string tar = dir_ + "/home/rootfs.tar";
    imported_ = RunProgram({"tar", "-C", bundle.rootfs(), "-cf", tar, "."}).exit_code == 0 &&
                chown(tar.c_str(), 65021, 65021) == 0 &&
                Call({"import", tar, kImage}).exit_code == 0;
  }
  ~RootlessPodman() {
    Call({"rm", "--all", "--force", "--time", "0"});
    // The uid's pause process holds podman's user namespace; the uid is this test's alone.
    RunProgram({"pkill", "-KILL", "-u", kUid});
    std::filesystem::remove_all(dir_);
  }

  bool imported() const { return imported_; }

  ProgramRun Call(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {"setpriv",
                                     "--reuid",
                                     kUid,
                                     "--regid",
                                     kUid,
                                     "--clear-groups",
                                     "env",
                                     "-i",
                                     "PATH=/usr/bin:/bin",
                                     "HOME=" + dir_ + "/home",
                                     "XDG_RUNTIME_DIR=" + dir_ + "/run",
                                     "podman",
                                     "--root",
                                     dir_ + "/home/storage",
                                     "--runroot",
                                     dir_ + "/run/s",
                                     "--storage-driver",
                                     "vfs",
                                     "--storage-opt",
                                     "vfs.ignore_chown_errors=true",
                                     "--cgroup-manager",
                                     "cgroupfs",
                                     "--runtime",
                                     SmolboxPath() + "-oci"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProgram(argv);
  }

  static constexpr const char* kImage = "localhost/smolbox-oci-busybox:rootless";

 private:
  std::string dir_ = fmt::format("/run/smolbox-oci-rl-{}", getpid());
  bool imported_ = false;
};

TEST(OciRootlessPodman, runs_and_execs_with_smolboxs_confinement_as_an_unprivileged_uid) {
  if (!OnPath("podman") || !OnPath("setpriv")) GTEST_SKIP() << "podman is not installed";
  RootlessPodman podman;
  ASSERT_TRUE(podman.imported()) << "podman import as uid " << RootlessPodman::kUid << " failed";
  auto run =
      podman.Call({"run", "--rm", "--network", "none", RootlessPodman::kImage, "/bin/sh", "-c",
                   "grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\\t' ' '; "
                   "tr -s ' ' < /proc/self/uid_map; exit 3"});
  EXPECT_EQ(run.exit_code, 3) << run.err;
  // The sandbox maps one id: root of the container is root of podman's namespace, which is the
  // unprivileged uid on the host.
  EXPECT_EQ(run.out, "CapEff: 0000000000000000\nNoNewPrivs: 1\nSeccomp: 2\n 0 0 1\n") << run.err;
  std::string token = RandomToken();
  ASSERT_EQ(podman
                .Call({"run", "-d", "--name", "r1", "--network", "none", RootlessPodman::kImage,
                       "/bin/sh", "-c", "sleep 600; :", token})
                .exit_code,
            0);
  EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(token) > 0; }, std::chrono::seconds(30)));
  // Rootless, the host's cgroups may hold no limit for the user: the exec gets the stand-in
  // rlimits that the container's own process gets, never none.
  auto exec = podman.Call({"exec", "r1", "/bin/sh", "-c", "echo in-exec $(ulimit -u); exit 5"});
  EXPECT_EQ(exec.exit_code, 5) << exec.err;
  EXPECT_EQ(exec.out, "in-exec 64\n") << "smolbox's default of 64 pids, as a process limit";
  EXPECT_EQ(podman.Call({"rm", "--force", "--time", "0", "r1"}).exit_code, 0);
  EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(token) == 0; }, std::chrono::seconds(30)));
}

}  // namespace
}  // namespace smolbox::testing
