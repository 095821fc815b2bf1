// The run's life: exit codes, bad input, nothing left behind, a killed runtime, rootless use.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "smolbox_runner.h"
#include "test_support.h"

namespace smolbox::testing {
namespace {

constexpr const char* kPython = "/usr/bin/python3";
constexpr const char* kNode = "/usr/bin/node";
constexpr uid_t kNobody = 65534;

TEST(Run, python_and_node_hello_pass_their_output_through) {
  auto py = RunSmolbox({"run", "--", kPython, "-c", "print('hello from python')"});
  EXPECT_EQ(py.exit_code, 0) << py.err;
  EXPECT_EQ(py.out, "hello from python\n");
  auto js = RunSmolbox({"run", "--", kNode, "-e", "console.log('hello from node')"});
  EXPECT_EQ(js.exit_code, 0) << js.err;
  EXPECT_EQ(js.out, "hello from node\n");
}

TEST(Run, stdin_reaches_the_workload_and_unicode_survives) {
  TempDir dir;
  std::string input = dir.Write("in.txt", "héllo wörld ✓\n");
  auto run = RunSmolbox({"run", "--stdin", input, "--", kPython, "-c", "import sys\nprint(sys.stdin.read().upper(), end='')"});
  EXPECT_EQ(run.out, "HÉLLO WÖRLD ✓\n") << run.err;
}

TEST(Run, the_workload_exit_code_is_passed_through) {
  auto run = RunSmolbox({"run", "--", "/bin/sh", "-c", "exit 7"});
  EXPECT_EQ(run.exit_code, 7);
}

TEST(Run, a_command_not_found_exits_127) {
  auto run = RunSmolbox({"run", "--", "no-such-command-here"});
  EXPECT_EQ(run.exit_code, 127) << run.err;
}

TEST(Run, a_signal_exits_128_plus_n) {
  auto run = RunSmolbox({"run", "--", "/bin/sh", "-c", "kill -SEGV $$"});
  EXPECT_EQ(run.exit_code, 128 + SIGSEGV) << run.err;
}

TEST(Run, version_and_help_work) {
  auto version = RunSmolbox({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out.rfind("smolbox ", 0), 0u) << version.out;
  auto help = RunSmolbox({"run", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--timeout"), std::string::npos);
}

struct BadInput {
  const char* name;
  std::vector<std::string> args;
  const char* field;
};

// Names the case in test logs instead of dumping its bytes.
void PrintTo(const BadInput& bad, std::ostream* os) { *os << bad.name; }

class BadInputTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(BadInputTest, exits_125_with_one_line_naming_the_field_and_leaves_nothing) {
  const BadInput& bad = GetParam();
  auto before = std::filesystem::exists("/run/smolbox/runs")
                    ? std::distance(std::filesystem::directory_iterator("/run/smolbox/runs"), {})
                    : 0;
  auto run = RunSmolbox(bad.args);
  EXPECT_EQ(run.exit_code, 125) << run.out << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_NE(run.err.find(bad.field), std::string::npos) << run.err;
  auto after = std::filesystem::exists("/run/smolbox/runs")
                   ? std::distance(std::filesystem::directory_iterator("/run/smolbox/runs"), {})
                   : 0;
  EXPECT_LE(after, before);
}

std::vector<BadInput> BadInputs() {
  static TempDir dir;
  std::string malformed = dir.Write("malformed.json", "{\"argv\": [");
  std::string unknown = dir.Write("unknown.json", R"({"argv": ["/bin/true"], "limits": {"memroy_mib": 5}})");
  // Once this took the machine's memory: the duplicate-key finder was O(depth^2).
  std::string deep = dir.Write("deep.json", std::string(200000, '[') + std::string(200000, ']'));
  static const std::string deep_error = "spec file " + deep + ": nesting deeper than 32 levels";
  return {
      {"malformed_spec", {"run", "--spec", malformed}, "spec"},
      {"deep_spec", {"run", "--spec", deep}, deep_error.c_str()},
      {"unknown_field", {"run", "--spec", unknown}, "limits.memroy_mib"},
      {"zero_memory", {"run", "--mem", "0", "--", "/bin/true"}, "memory"},
      {"negative_timeout", {"run", "--timeout", "-1s", "--", "/bin/true"}, "timeout"},
      {"absurd_pids", {"run", "--pids", "100000000", "--", "/bin/true"}, "pids"},
      {"missing_image", {"run", "--image", "/no/such/rootfs", "--", "/bin/true"}, "image"},
      {"missing_volume_source", {"run", "-v", "/no/such/dir:/data", "--", "/bin/true"}, "source"},
      {"relative_target", {"run", "-v", "/tmp:data", "--", "/bin/true"}, "target"},
      {"dotdot_target", {"run", "-v", "/tmp:/data/../etc", "--", "/bin/true"}, "target"},
      {"proc_target", {"run", "-v", "/tmp:/proc", "--", "/bin/true"}, "target"},
      {"dev_target", {"run", "-v", "/tmp:/dev/x", "--", "/bin/true"}, "target"},
      {"root_target", {"run", "-v", "/tmp:/", "--", "/bin/true"}, "target"},
      {"unknown_backend", {"run", "--backend", "qemu", "--", "/bin/true"}, "backend"},
      {"vm_memory_below_floor", {"run", "--backend", "vm", "--accel", "tcg", "--mem", "16M", "--", "/bin/true"}, "limits.memory_mib"},
      {"unknown_accel", {"run", "--backend", "vm", "--accel", "hvf", "--", "/bin/true"}, "accel"},
      {"empty_command", {"run"}, "argv"},
  };
}

INSTANTIATE_TEST_SUITE_P(Cases, BadInputTest, ::testing::ValuesIn(BadInputs()),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

// Run dirs and cgroups that belong to no live runtime.
std::vector<std::string> Leftovers(pid_t owner) {
  std::vector<std::string> found;
  if (std::filesystem::exists("/run/smolbox/runs")) {
    for (const auto& run : std::filesystem::directory_iterator("/run/smolbox/runs")) {
      std::string text = ReadFileOrEmpty(run.path().string() + "/owner");
      if (text.rfind(std::to_string(owner) + " ", 0) == 0) found.push_back(run.path());
    }
  }
  return found;
}

// Every run cgroup on the host, in every hierarchy.
std::set<std::string> RunCgroups() {
  std::set<std::string> found;
  for (const char* root : {"/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/cpu", "/sys/fs/cgroup"}) {
    if (!std::filesystem::exists(root)) continue;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(
             root, std::filesystem::directory_options::skip_permission_denied)) {
      if (entry.path().filename().string().rfind("smolbox-", 0) == 0) found.insert(entry.path().string());
    }
  }
  return found;
}

TEST(Cleanup, a_finished_run_leaves_no_run_dir_cgroup_or_loop_device) {
  std::string marker = RandomToken();
  std::set<std::string> before = RunCgroups();
  auto run = RunJson({}, {"/bin/sh", "-c", "echo " + marker});
  ASSERT_EQ(run.result["status"], "exited") << run.err;
  EXPECT_EQ(CountProcessesWith(marker), 0);
  std::string added;
  for (const auto& path : RunCgroups()) {
    if (!before.contains(path)) added += path + " ";
  }
  // Other tests may run concurrently; a leftover of this run would be one with no live owner.
  for (const auto& path : std::filesystem::directory_iterator("/run/smolbox/runs")) {
    std::string owner = ReadFileOrEmpty(path.path().string() + "/owner");
    int pid = owner.empty() ? 0 : std::stoi(owner);
    EXPECT_TRUE(pid > 0 && kill(pid, 0) == 0) << "stale run dir " << path.path();
  }
  if (CountProcessesWith("smolbox") == 0) {
    EXPECT_EQ(added, "");
  }
}

// This process's directory in the v1 memory hierarchy, or "" where there is none.
std::string OwnV1MemoryCgroup() {
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    auto first = line.find(':'), second = line.find(':', first + 1);
    if (second == std::string::npos || line.substr(first + 1, second - first - 1) != "memory") continue;
    std::string path = "/sys/fs/cgroup/memory" + line.substr(second + 1);
    return std::filesystem::is_directory(path) ? path : "";
  }
  return "";
}

TEST(Cleanup, sigkill_of_smolbox_mid_run_leaves_nothing_running_or_behind) {
  std::string marker = RandomToken();
  // The killed runtime lives in a cgroup of its own, as another login or job would, so the
  // sweep below has to find its v1 cgroups outside the sweeper's own.
  std::string job_cgroup;
  if (std::string own = OwnV1MemoryCgroup(); !own.empty()) {
    job_cgroup = own + "/job-" + marker;
    ASSERT_EQ(mkdir(job_cgroup.c_str(), 0755), 0) << strerror(errno);
  }
  std::string job_procs = job_cgroup + "/cgroup.procs";
  pid_t pid = fork();
  if (pid == 0) {
    if (!job_cgroup.empty()) {
      int procs = open(job_procs.c_str(), O_WRONLY);
      if (procs < 0 || write(procs, "0", 1) != 1) _exit(98);
      close(procs);
    }
    int null_fd = open("/dev/null", O_RDWR);
    dup2(null_fd, 1);
    dup2(null_fd, 2);
    execl(SmolboxPath().c_str(), "smolbox", "run", "--timeout", "60s", "--", kPython, "-c",
          "import time\nwhile True: time.sleep(1)", marker.c_str(), nullptr);
    _exit(99);
  }
  for (int i = 0; i < 100 && CountProcessesWith(marker) < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GE(CountProcessesWith(marker), 2) << "the workload never started";
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  for (int i = 0; i < 50 && CountProcessesWith(marker) > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(CountProcessesWith(marker), 0) << "the sandbox outlived its runtime";
  // The next runtime sweeps what the killed one could not clean.
  auto next = RunJson({}, {"/bin/true"});
  EXPECT_EQ(next.result["status"], "exited");
  EXPECT_TRUE(Leftovers(pid).empty());
  if (!job_cgroup.empty()) {
    std::string left;
    for (const auto& entry : std::filesystem::directory_iterator(job_cgroup)) {
      if (!entry.is_directory()) continue;
      left += entry.path().string() + " ";
      rmdir(entry.path().c_str());
    }
    EXPECT_EQ(left, "") << "the sweep missed the killed run's memory cgroup";
    EXPECT_EQ(rmdir(job_cgroup.c_str()), 0) << strerror(errno);
  }
}

TEST(Rootless, an_unprivileged_user_runs_python_and_node_with_warnings_for_weaker_limits) {
  auto py = RunSmolbox({"run", "--json", "--", kPython, "-c", "import os\nprint('hello', os.getuid())"}, {}, kNobody);
  ASSERT_EQ(py.result.value("status", ""), "exited") << py.out << py.err;
  EXPECT_EQ(py.result["stdout"], "hello 1000\n");
  EXPECT_NE(py.result["warnings"].dump().find("storage"), std::string::npos) << py.result["warnings"];
  auto js = RunSmolbox({"run", "--json", "--", kNode, "-e", "console.log('hello')"}, {}, kNobody);
  EXPECT_EQ(js.result.value("stdout", ""), "hello\n") << js.out << js.err;
}

TEST(Rootless, the_timeout_and_network_still_hold_for_an_unprivileged_user) {
  auto run = RunSmolbox({"run", "--json", "--timeout", "1s", "--", kPython, "-c", "while True: pass"}, {}, kNobody);
  EXPECT_EQ(run.result.value("status", ""), "timeout") << run.out << run.err;
  EXPECT_LT(run.seconds, 4.0);
  auto net = RunSmolbox({"run", "--json", "--", kPython, "-c",
                         "print(sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]))"},
                        {}, kNobody);
  EXPECT_EQ(net.result.value("stdout", ""), "['lo']\n") << net.out << net.err;
}

}  // namespace
}  // namespace smolbox::testing
