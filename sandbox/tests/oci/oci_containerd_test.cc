// Real containerd running containers through smolbox-oci: a containerd of the test's own, and
// `ctr run --runtime io.containerd.runc.v2 --runc-binary smolbox-oci`, the runc shim that
// Kubernetes' CRI uses too, on a rootfs directory (ctr run --rootfs).
#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <vector>

#include "oci_bundle.h"
#include "smolbox_runner.h"

namespace smolbox::testing {
namespace {

// Its root, state and sockets are the test's; the CRI plugin is off (no Kubernetes here). Its
// shim keeps a socket dir of its own in /run/containerd/s.
class Containerd {
 public:
  Containerd() {
    std::string d = dir_.path();
    WriteFile(d + "/config.toml",
              "version = 2\nroot = \"" + d + "/root\"\nstate = \"" + d +
                  "/state\"\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n"
                  "[grpc]\n  address = \"" +
                  d +
                  "/containerd.sock\"\n"
                  "[ttrpc]\n  address = \"" +
                  d + "/containerd.sock.ttrpc\"\n");
    RunProgram({"/bin/sh", "-c",
                "setsid containerd --config " + d + "/config.toml </dev/null >" + d +
                    "/log 2>&1 & echo $! > " + d + "/pid"});
    up_ = WaitUntil([&] { return Call({"version"}).exit_code == 0; }, std::chrono::seconds(60));
  }
  ~Containerd() {
    pid_t pid = std::atoi(ReadFileOrEmpty(dir_.path() + "/pid").c_str());
    if (pid > 0 && kill(pid, SIGTERM) == 0)
      WaitUntil([&] { return !ProcessAlive(pid); }, std::chrono::seconds(30));
    UnmountEverythingUnder(dir_.path());
  }

  bool up() const { return up_; }
  std::string log() const { return ReadFileOrEmpty(dir_.path() + "/log"); }

  ProgramRun Call(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {"ctr", "--address", dir_.path() + "/containerd.sock"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProgram(argv);
  }

  // ctr run --rm with smolbox-oci as the shim's runc binary, on rootfs.
  ProgramRun Run(const std::vector<std::string>& options, const std::string& rootfs,
                 const std::string& id, const std::vector<std::string>& command) const {
    std::vector<std::string> args = {"run",           "--rm",
                                     "--runtime",     "io.containerd.runc.v2",
                                     "--runc-binary", SmolboxPath() + "-oci"};
    args.insert(args.end(), options.begin(), options.end());
    // --rootfs is a switch: the rootfs is the first argument after the flags, then the id.
    args.insert(args.end(), {"--rootfs", rootfs, id});
    args.insert(args.end(), command.begin(), command.end());
    return Call(args);
  }

 private:
  TempDir dir_{"oci-containerd"};
  bool up_ = false;
};

class OciContainerd : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!OnPath("containerd") || !OnPath("ctr")) GTEST_SKIP() << "containerd is not installed";
    containerd_ = std::make_unique<Containerd>();
    ASSERT_TRUE(containerd_->up()) << "containerd did not start:\n" << containerd_->log();
  }
  std::unique_ptr<Containerd> containerd_;
  OciBundle bundle_;  // its rootfs
};

TEST_F(OciContainerd, ctr_runs_a_container_in_a_smolbox_sandbox_with_its_tmpfs_and_exit_code) {
  auto run = containerd_->Run(
      {}, bundle_.rootfs(), "c1",
      {"/bin/sh", "-c",
       "echo $(id -u) $(cat /etc/shadow) $(ls -A /run | wc -l); touch /run/x && echo run-writable; "
       "grep -E '^(CapEff|NoNewPrivs):' /proc/self/status | tr -s '\\t' ' '; exit 6"});
  EXPECT_EQ(run.exit_code, 6) << run.err;
  EXPECT_EQ(run.out, "0 root-only 0\nrun-writable\nCapEff: 0000000000000000\nNoNewPrivs: 1\n")
      << run.err;
}

TEST_F(OciContainerd, ctrs_memory_limit_holds) {
  auto memory = containerd_->Run(
      {"--memory-limit", "33554432"}, bundle_.rootfs(), "c2",
      {"/bin/sh", "-c", "x=$(head -c 67108864 /dev/zero | tr '\\0' a); echo survived"});
  EXPECT_EQ(memory.exit_code, 137) << memory.out << memory.err;
}

TEST_F(OciContainerd, ctr_tasks_exec_runs_beside_the_containers_process) {
  std::string token = RandomToken();
  auto started = containerd_->Call(
      {"run", "-d", "--runtime", "io.containerd.runc.v2", "--runc-binary", SmolboxPath() + "-oci",
       "--rootfs", bundle_.rootfs(), "c3", "/bin/sh", "-c", "sleep 600; :", token});
  ASSERT_EQ(started.exit_code, 0) << started.err;
  EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(token) > 0; }, std::chrono::seconds(30)));
  auto exec = containerd_->Call({"tasks", "exec", "--exec-id", "x1", "c3", "/bin/sh", "-c",
                                 "grep -E '^NoNewPrivs:' /proc/self/status | tr -s '\\t' ' '; "
                                 "exit 4"});
  EXPECT_EQ(exec.exit_code, 4) << exec.err;
  EXPECT_EQ(exec.out, "NoNewPrivs: 1\n") << exec.err;
  EXPECT_GT(CountProcessesWith(token), 0) << "the container's process goes on";
  EXPECT_EQ(containerd_->Call({"tasks", "kill", "--signal", "SIGKILL", "c3"}).exit_code, 0);
  EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(token) == 0; }, std::chrono::seconds(30)));
  EXPECT_TRUE(WaitUntil(
      [&] {
        return containerd_->Call({"tasks", "delete", "c3"}).exit_code == 0;
      },
      std::chrono::seconds(30)));
  EXPECT_EQ(containerd_->Call({"containers", "delete", "c3"}).exit_code, 0);
}

}  // namespace
}  // namespace smolbox::testing
