#include "launch/launcher.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>
#include <vector>

#include "battery/canaries.h"
#include "test_support.h"

namespace smolvm_check {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using smolbox::testing::OpenFdCount;
using smolbox::testing::ReadFileOrEmpty;
using smolbox::testing::Running;
using smolbox::testing::TempDir;

constexpr char kPath[] = "PATH=/usr/local/bin:/usr/bin:/bin";

Launch Shell(const std::string& script, int64_t kill_after_ms = 10000) {
  Launch launch;
  launch.argv = {"sh", "-c", script};
  launch.env = {kPath};
  launch.kill_after_ms = kill_after_ms;
  launch.capture_bytes = 1 << 20;
  return launch;
}

bool EventuallyDead(pid_t pid) {
  for (int i = 0; i < 200 && Running(pid); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return !Running(pid);
}

TEST(SafetyNet, captures_stdout_stderr_and_the_exit_code) {
  Observation o = LaunchInSafetyNet(Shell("echo out; echo err >&2; exit 3"));
  EXPECT_EQ(o.error, "");
  EXPECT_EQ(o.exit_code, 3);
  EXPECT_EQ(o.signal, 0);
  EXPECT_FALSE(o.killed_by_net);
  EXPECT_EQ(o.stdout_data, "out\n");
  EXPECT_EQ(o.stderr_data, "err\n");
}

TEST(SafetyNet, caps_the_capture_and_counts_what_it_dropped) {
  Launch launch = Shell("head -c 3000000 /dev/zero; head -c 10 /dev/zero >&2");
  launch.capture_bytes = 1000;
  Observation o = LaunchInSafetyNet(launch);
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_EQ(o.stdout_data.size(), 1000u);
  EXPECT_EQ(o.stdout_bytes, 3000000);
  EXPECT_EQ(o.stderr_bytes, 10);
}

TEST(SafetyNet, feeds_stdin_larger_than_a_pipe_buffer) {
  Launch launch = Shell("cat");
  launch.stdin_data = std::string(1 << 20, 'x') + "end";
  launch.capture_bytes = 2 << 20;
  Observation o = LaunchInSafetyNet(launch);
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_EQ(o.stdout_data, launch.stdin_data);
}

TEST(SafetyNet, survives_a_launch_that_closes_its_stdin) {
  Launch launch = Shell("exec 0<&-; echo closed");
  launch.stdin_data = std::string(1 << 20, 'x');
  Observation o = LaunchInSafetyNet(launch);
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_EQ(o.stdout_data, "closed\n");
}

TEST(SafetyNet, passes_the_environment_cwd_and_searches_the_launch_path) {
  TempDir dir("launcher-test");
  Launch launch = Shell("echo $FOO; pwd");
  launch.env.push_back("FOO=bar");
  launch.cwd = dir.path();
  Observation o = LaunchInSafetyNet(launch);
  EXPECT_EQ(o.stdout_data, "bar\n" + dir.path() + "\n");
}

TEST(SafetyNet, passes_exactly_the_inherited_fds) {
  int inherited = fcntl(open("/dev/null", O_RDONLY | O_CLOEXEC), F_DUPFD_CLOEXEC, 20);
  int other = fcntl(open("/dev/null", O_RDONLY), F_DUPFD, 30);  // not close-on-exec, not passed
  ASSERT_GE(inherited, 20);
  ASSERT_GE(other, 30);
  // Builtins only: a listing or a redirection would open descriptors of the shell's own.
  Launch launch = Shell(
      "i=0; while [ $i -lt 64 ]; do [ -e /proc/$$/fd/$i ] && printf '%s ' $i; i=$((i+1)); done");
  launch.inherited_fds = {inherited};
  Observation o = LaunchInSafetyNet(launch);
  EXPECT_EQ(o.stdout_data, "0 1 2 " + std::to_string(inherited) + " ");
  // The parent's copy stays close-on-exec; only the child cleared it.
  EXPECT_TRUE(fcntl(inherited, F_GETFD) & FD_CLOEXEC);
  close(inherited);
  close(other);
}

TEST(SafetyNet, runs_the_launch_in_its_own_session_without_core_dumps) {
  Observation o =
      LaunchInSafetyNet(Shell("read pid comm state ppid pgrp session rest < /proc/$$/stat; "
                              "echo $((pid == pgrp && pid == session)) $(ulimit -c)"));
  EXPECT_EQ(o.stdout_data, "1 0\n");
}

TEST(SafetyNet, kills_the_tree_at_the_bound) {
  auto start = Clock::now();
  Observation o = LaunchInSafetyNet(Shell("while :; do :; done", 500));
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  EXPECT_TRUE(o.killed_by_net);
  EXPECT_EQ(o.signal, SIGKILL);
  EXPECT_EQ(o.exit_code, -1);
  EXPECT_GE(o.wall_ms, 500);
  EXPECT_LT(o.wall_ms, 2000);
  EXPECT_LT(took.count(), 2000);
}

TEST(SafetyNet, does_not_wait_for_a_daemon_holding_stdout) {
  SafetyNet net;
  auto start = Clock::now();
  Observation o = net.Launch(Shell("sleep 30 & echo main"));
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count(),
            2000);
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_EQ(o.stdout_data, "main\n");
  EXPECT_EQ(net.Remaining().size(), 1u);
  net.KillAll();
  EXPECT_TRUE(net.Remaining().empty());
}

TEST(SafetyNet, kills_a_setsid_double_forked_daemon_when_destroyed) {
  TempDir dir("launcher-test");
  std::string pid_file = dir.path() + "/daemon.pid";
  pid_t daemon = 0;
  {
    auto net = SafetyNet::Create();
    ASSERT_TRUE(net.has_value());
    if (!net->has_cgroup()) GTEST_SKIP() << "no cgroup here: " << net->warning();
    Observation o = net->Launch(Shell("(setsid sh -c 'echo $$ > " + pid_file + ".tmp; mv " +
                                      pid_file + ".tmp " + pid_file +
                                      "; exec sleep 60' </dev/null >/dev/null 2>&1 &); "
                                      "while [ ! -s " +
                                      pid_file + " ]; do sleep 0.01; done"));
    ASSERT_EQ(o.exit_code, 0) << o.error << o.stderr_data;
    daemon = std::stoi(ReadFileOrEmpty(pid_file));
    EXPECT_TRUE(Running(daemon));
    auto left = net->Remaining();
    EXPECT_NE(std::find(left.begin(), left.end(), daemon), left.end());
  }
  EXPECT_TRUE(EventuallyDead(daemon));
}

TEST(SafetyNet, holds_the_launch_in_a_cgroup_and_leaves_no_cgroup_behind) {
  std::vector<std::string> dirs;
  {
    SafetyNet net;
    if (!net.has_cgroup()) GTEST_SKIP() << "no cgroup here: " << net.warning();
    Observation o = net.Launch(Shell("cat /proc/self/cgroup"));
    ASSERT_EQ(o.exit_code, 0);
    // hierarchy-id:controllers:/path; the mount point is found from mountinfo the same way.
    std::istringstream lines(o.stdout_data);
    for (std::string line; std::getline(lines, line);) {
      if (line.find("smolvm-check-") != std::string::npos) dirs.push_back(line);
    }
    ASSERT_FALSE(dirs.empty()) << o.stdout_data;
  }
  // After the net: no directory of that name under any cgroup mount.
  std::string name = dirs[0].substr(dirs[0].rfind('/') + 1);
  std::istringstream mounts(ReadFileOrEmpty("/proc/self/mountinfo"));
  for (std::string line; std::getline(mounts, line);) {
    if (line.find(" - cgroup") == std::string::npos) continue;
    std::istringstream fields(line);
    std::string f, mount;
    for (int i = 0; i < 5 && fields >> f; ++i) mount = f;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(mount, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      EXPECT_NE(it->path().filename(), name) << it->path();
      if (it.depth() > 3) it.disable_recursion_pending();
    }
  }
}

TEST(SafetyNet, without_a_cgroup_says_so) {
  SafetyNet net;
  EXPECT_EQ(net.has_cgroup(), !net.warning().starts_with("no cgroup"));
  if (geteuid() != 0) {
    EXPECT_FALSE(net.has_cgroup());
  }
}

TEST(SafetyNet, reports_a_program_that_is_not_on_path) {
  Launch launch = Shell("");
  launch.argv = {"no-such-program-smolvm"};
  Observation o = LaunchInSafetyNet(launch);
  EXPECT_NE(o.error.find("no-such-program-smolvm"), std::string::npos) << o.error;
}

TEST(SafetyNet, reports_the_step_that_failed_before_exec) {
  Launch launch = Shell("true");
  launch.cwd = "/no/such/dir";
  Observation o = LaunchInSafetyNet(launch);
  EXPECT_EQ(o.error, "launch: chdir /no/such/dir: No such file or directory");
  launch = Shell("true");
  launch.argv[0] = "/no/such/program";
  o = LaunchInSafetyNet(launch);
  EXPECT_EQ(o.error, "launch: execve /no/such/program: No such file or directory");
}

// The battery's egress cases: the launch in the test internet's uplink, with its resolver.
TEST(SafetyNet, joins_a_network_namespace_with_its_own_resolv_conf) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, for a network namespace";
  const std::string netns = "smvc-launch-" + std::to_string(getpid());
  ASSERT_EQ(smolbox::testing::RunProgram({"ip", "netns", "add", netns}).exit_code, 0);
  TempDir dir("launch-netns");
  const std::string resolv = dir.Write("resolv.conf", "nameserver 203.0.113.53\n");
  const std::string host_resolv = ReadFileOrEmpty("/etc/resolv.conf");
  Launch launch = Shell("stat -L -c %i /proc/self/ns/net; cat /etc/resolv.conf");
  launch.netns_path = "/run/netns/" + netns;
  launch.resolv_conf = resolv;
  Observation o = LaunchInSafetyNet(launch);
  struct stat st {};
  ASSERT_EQ(stat(launch.netns_path.c_str(), &st), 0);
  EXPECT_EQ(o.error, "");
  EXPECT_EQ(o.stdout_data, std::to_string(st.st_ino) + "\nnameserver 203.0.113.53\n") << o.stderr_data;
  // The bind stayed in the launch's own mount namespace.
  EXPECT_EQ(ReadFileOrEmpty("/etc/resolv.conf"), host_resolv);
  EXPECT_EQ(ReadFileOrEmpty("/proc/self/mountinfo").find(" /etc/resolv.conf "), std::string::npos);
  smolbox::testing::RunProgram({"ip", "netns", "del", netns});
  launch.netns_path = "/run/netns/" + netns;
  o = LaunchInSafetyNet(launch);
  EXPECT_EQ(o.error, "launch: open /run/netns/" + netns + ": No such file or directory");
}

TEST(SafetyNet, refuses_a_launch_without_a_bound) {
  Observation o = LaunchInSafetyNet(Shell("true", 0));
  EXPECT_NE(o.error.find("kill_after_ms"), std::string::npos) << o.error;
}

TEST(SafetyNet, launches_once) {
  SafetyNet net;
  EXPECT_EQ(net.Launch(Shell("true")).error, "");
  EXPECT_NE(net.Launch(Shell("true")).error, "");
}

TEST(SafetyNet, concurrent_launches_keep_their_own_output) {
  std::vector<Observation> results(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&results, i] {
      Launch launch = Shell("cat; sleep 0.2; echo " + std::to_string(i) + " >&2");
      launch.stdin_data = std::string(100000, static_cast<char>('a' + i));
      results[i] = LaunchInSafetyNet(launch);
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i].stdout_data, std::string(100000, static_cast<char>('a' + i)));
    EXPECT_EQ(results[i].stderr_data, std::to_string(i) + "\n");
  }
}

// The null sandbox in miniature: every canary a launch can reach without isolation, it reaches.
TEST(SafetyNet, an_unisolated_launch_reaches_the_canaries_by_their_hints) {
  TempDir dir("launcher-test");
  auto canaries = CanarySet::Plant({dir.path() + "/case", false});
  ASSERT_TRUE(canaries.has_value()) << canaries.error().ToString();
  const auto& hints = (*canaries)->hints();
  // dash takes one-digit fd numbers only in redirections, so the fd goes by /dev/fd.
  Launch launch = Shell("cat " + hints.at("canary_file") + " /dev/fd/" + hints.at("canary_fd") +
                        "; echo $SMOLVM_CHECK_CANARY; kill -URG " + hints.at("host_pid"));
  for (const auto& e : (*canaries)->env()) launch.env.push_back(e);
  launch.inherited_fds = (*canaries)->inherited_fds();
  Observation o = LaunchInSafetyNet(launch);
  EXPECT_EQ(o.exit_code, 0) << o.error << o.stderr_data;
  auto leaked = (*canaries)->Leaked(o.stdout_data);
  EXPECT_EQ(leaked, (std::vector<std::string>{"env", "file", "inherited_fd"}));
  bool signalled = false;
  for (int i = 0; i < 200 && !signalled; ++i) {
    for (const auto& d : (*canaries)->Detections()) signalled |= d.starts_with("SIGURG from pid ");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(signalled);
}

TEST(SafetyNet, leaks_no_descriptors) {
  size_t before = OpenFdCount();
  Launch launch = Shell("cat; echo done >&2");
  launch.stdin_data = "x";
  for (int i = 0; i < 5; ++i) LaunchInSafetyNet(launch);
  LaunchInSafetyNet(Shell("true", 0));
  EXPECT_EQ(OpenFdCount(), before);
}

}  // namespace
}  // namespace smolvm_check
