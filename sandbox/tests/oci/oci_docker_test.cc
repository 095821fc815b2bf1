// Real docker running containers through smolbox-oci: a dockerd of the test's own whose
// daemon.json names the runtime, and `docker run --runtime smolbox`. docker drives the runtime
// through containerd's runc shim, and adds a prestart hook (libnetwork-setkey) to every container.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <string>
#include <vector>

#include "oci_bundle.h"
#include "smolbox_runner.h"

namespace smolbox::testing {
namespace {

// dockerd with no bridge, no iptables rules and no userland proxy, so that it changes nothing of
// the host's network or of a docker the host already runs; its state is all under the test's
// directory (containerd's shim keeps a socket dir of its own in /run/containerd/s).
class Docker {
 public:
  Docker() {
    WriteFile(dir_.path() + "/daemon.json",
              R"({"runtimes": {"smolbox": {"path": ")" + SmolboxPath() + R"(-oci"}}})");
    std::string d = dir_.path();
    RunProgram({"/bin/sh", "-c",
                "setsid dockerd --config-file " + d + "/daemon.json --data-root " + d +
                    "/data --exec-root " + d + "/exec --pidfile " + d + "/dockerd.pid -H unix://" +
                    d +
                    "/docker.sock --bridge none --iptables=false --ip6tables=false --ip-masq=false "
                    "--userland-proxy=false </dev/null >" +
                    d + "/dockerd.log 2>&1 &"});
    up_ = WaitUntil([&] { return Call({"info"}).exit_code == 0; }, std::chrono::seconds(60));
    OciBundle bundle;
    ProgramRun tar = RunProgram({"tar", "-C", bundle.rootfs(), "-cf", d + "/rootfs.tar", "."});
    imported_ =
        up_ && tar.exit_code == 0 && Call({"import", d + "/rootfs.tar", kImage}).exit_code == 0;
  }
  ~Docker() {
    if (up_) Call({"rm", "--force", "--volumes", "s1", "s2"});
    pid_t pid = 0;
    std::ifstream(dir_.path() + "/dockerd.pid") >> pid;
    if (pid > 0 && kill(pid, SIGTERM) == 0)
      WaitUntil([&] { return !ProcessAlive(pid); }, std::chrono::seconds(30));
    // What a daemon leaves mounted under its directories: innermost first.
    UnmountEverythingUnder(dir_.path());
  }

  bool ready() const { return imported_; }
  std::string log() const { return ReadFileOrEmpty(dir_.path() + "/dockerd.log"); }

  ProgramRun Call(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {"docker", "-H", "unix://" + dir_.path() + "/docker.sock"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProgram(argv);
  }

  ProgramRun Run(const std::vector<std::string>& options,
                 const std::vector<std::string>& command) const {
    std::vector<std::string> args = {"run", "--rm", "--runtime", "smolbox"};
    args.insert(args.end(), options.begin(), options.end());
    args.push_back(kImage);
    args.insert(args.end(), command.begin(), command.end());
    return Call(args);
  }

  // A shell that stays, with token as its $0, for CountProcessesWith.
  ProgramRun StartSleeper(const std::string& name, const std::string& token) const {
    return Call({"run", "-d", "--name", name, "--runtime", "smolbox", kImage, "/bin/sh", "-c",
                 "sleep 600; :", token});
  }

  static constexpr const char* kImage = "localhost/smolbox-oci-busybox:test";

 private:
  TempDir dir_{"oci-docker"};
  bool up_ = false;
  bool imported_ = false;
};

class OciDocker : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!OnPath("dockerd") || !OnPath("docker")) GTEST_SKIP() << "docker is not installed";
    docker_ = std::make_unique<Docker>();
    ASSERT_TRUE(docker_->ready()) << "dockerd did not start, or the import failed:\n"
                                  << docker_->log();
  }
  std::unique_ptr<Docker> docker_;
};

TEST_F(OciDocker, runs_a_container_in_a_smolbox_sandbox_with_its_hook_and_exit_code) {
  auto run = docker_->Run(
      {"--hostname", "box1"},
      {"/bin/sh", "-c",
       "echo $(hostname) $(id -u) $(cat /etc/shadow); grep -E '^(CapEff|NoNewPrivs|Seccomp):' "
       "/proc/self/status | tr -s '\\t' ' '; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; "
       "exit 3"});
  EXPECT_EQ(run.exit_code, 3) << run.err;
  EXPECT_EQ(run.out, "box1 0 root-only\nCapEff: 0000000000000000\nNoNewPrivs: 1\nSeccomp: 2\nlo\n")
      << run.err;
}

TEST_F(OciDocker, the_engines_memory_pids_and_terminal_options_hold) {
  auto memory = docker_->Run(
      {"--memory", "32m"},
      {"/bin/sh", "-c", "x=$(head -c 67108864 /dev/zero | tr '\\0' a); echo survived"});
  EXPECT_EQ(memory.exit_code, 137) << memory.out << memory.err;
  auto pids = docker_->Run(
      {"--pids-limit", "20"},
      {"/bin/sh", "-c", "for i in $(seq 40); do sleep 30 & done 2>/dev/null; echo spawned"});
  EXPECT_NE(pids.out, "spawned\n") << "40 processes started under --pids-limit 20";
  auto tty = docker_->Run({"-t"}, {"echo", "on-a-tty"});
  EXPECT_EQ(tty.exit_code, 0) << tty.err;
  EXPECT_EQ(tty.out, "on-a-tty\r\n");
}

// One dockerd for both: each takes seconds to start.
TEST_F(OciDocker, exec_runs_beside_a_running_container_and_stop_and_rm_force_end_it) {
  std::string token = RandomToken();
  ASSERT_EQ(docker_->StartSleeper("s1", token).exit_code, 0);
  EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(token) > 0; }, std::chrono::seconds(30)));
  auto exec = docker_->Call({"exec", "--user", "1000", "s1", "/bin/sh", "-c",
                             "id -u; grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status | "
                             "tr -s '\\t' ' '; exit 4"});
  EXPECT_EQ(exec.exit_code, 4) << exec.err;
  EXPECT_EQ(exec.out, "1000\nCapEff: 0000000000000000\nNoNewPrivs: 1\nSeccomp: 2\n") << exec.err;
  auto tty = docker_->Call({"exec", "-t", "s1", "echo", "on-a-tty"});
  EXPECT_EQ(tty.exit_code, 0) << tty.err;
  EXPECT_EQ(tty.out, "on-a-tty\r\n");
  EXPECT_EQ(docker_->Call({"stop", "--time", "2", "s1"}).exit_code, 0);
  EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(token) == 0; }, std::chrono::seconds(30)));
  auto inspected =
      docker_->Call({"inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", "s1"});
  EXPECT_EQ(inspected.out, "exited 143\n") << "SIGTERM ended it: " << inspected.err;

  std::string second = RandomToken();
  ASSERT_EQ(docker_->StartSleeper("s2", second).exit_code, 0);
  EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(second) > 0; }, std::chrono::seconds(30)));
  EXPECT_EQ(docker_->Call({"rm", "--force", "s2"}).exit_code, 0);
  EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(second) == 0; }, std::chrono::seconds(30)));
}

}  // namespace
}  // namespace smolbox::testing
