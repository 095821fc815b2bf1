// Persistent sandboxes through the real CLI: smolbox create / exec / ls / rm, on the ns backend
// (and the vm backend under TCG at the end), with their failure modes and what rm leaves.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <sstream>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "client.h"
#include "sandbox_state.h"
#include "smolbox_runner.h"
#include "test_support.h"

namespace smolbox::testing {
namespace {

constexpr const char* kPython = "/usr/bin/python3";
constexpr const char* kSandboxes = "/run/smolbox/sandboxes";
constexpr const char* kRuns = "/run/smolbox/runs";

std::string NewName() { return "t-" + RandomToken().substr(0, 16); }

// A delay drawn from [low_ms, high_ms], so that a fault lands at a different point of an exec
// each time; recorded in the test's XML report.
std::chrono::milliseconds RandomDelay(int low_ms, int high_ms) {
  static std::mt19937 rng(std::random_device{}());
  int ms = std::uniform_int_distribution<int>(low_ms, high_ms)(rng);
  ::testing::Test::RecordProperty("delay_ms", ms);
  return std::chrono::milliseconds(ms);
}

// Removes the sandbox whatever the test did, so that a failed test leaves nothing running.
class Sandbox {
 public:
  explicit Sandbox(std::vector<std::string> options = {}) : name_(NewName()) {
    std::vector<std::string> args = {"create", "--json", name_};
    args.insert(args.end(), options.begin(), options.end());
    created_ = RunSmolbox(args);
  }
  ~Sandbox() { RunSmolbox({"rm", "--force", name_}); }
  const std::string& name() const { return name_; }
  const Invocation& created() const { return created_; }

 private:
  std::string name_;
  Invocation created_;
};

Invocation Exec(const std::string& name, const std::vector<std::string>& options, const std::vector<std::string>& command) {
  std::vector<std::string> args = {"exec", "--json"};
  args.insert(args.end(), options.begin(), options.end());
  args.push_back(name);
  args.push_back("--");
  args.insert(args.end(), command.begin(), command.end());
  return RunSmolbox(args);
}

nlohmann::json Listed(const std::string& name) {
  auto ls = RunSmolbox({"ls", "--json"});
  auto all = nlohmann::json::parse(ls.out, nullptr, false);
  if (all.is_array()) {
    for (const auto& box : all) {
      if (box.value("name", "") == name) return box;
    }
  }
  return nullptr;
}

pid_t KeeperPid(const std::string& name) {
  auto info = nlohmann::json::parse(ReadFileOrEmpty(std::string(kSandboxes) + "/" + name + "/info.json"), nullptr, false);
  return info.is_object() ? info.value("keeper_pid", 0) : 0;
}

std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> out;
  std::istringstream in(ReadFileOrEmpty(fmt::format("/proc/{}/task/{}/children", pid, pid)));
  for (pid_t child; in >> child;) out.push_back(child);
  return out;
}

// The run directory (and so the cgroup name) of the sandbox that `keeper` holds.
std::string RunIdOf(pid_t keeper) {
  if (!std::filesystem::exists(kRuns)) return "";
  for (const auto& run : std::filesystem::directory_iterator(kRuns)) {
    if (ReadFileOrEmpty(run.path().string() + "/owner").rfind(std::to_string(keeper) + " ", 0) == 0) {
      return run.path().filename();
    }
  }
  return "";
}

std::vector<std::string> CgroupsNamed(const std::string& fragment) {
  std::vector<std::string> found;
  for (const char* root : {"/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/unified"}) {
    if (!std::filesystem::exists(root)) continue;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(
             root, std::filesystem::directory_options::skip_permission_denied)) {
      if (entry.is_directory() && entry.path().filename().string().find(fragment) != std::string::npos) {
        found.push_back(entry.path());
      }
    }
  }
  return found;
}

// What a sandbox holds on the host while it runs: its keeper, the keeper's children (the agent,
// or QEMU), and its run dir's name (and so its cgroups'), for ExpectNoTrace afterwards.
struct Holdings {
  pid_t keeper;
  std::vector<pid_t> children;
  std::string run_id;
};

Holdings HoldingsOf(const std::string& name) {
  pid_t keeper = KeeperPid(name);
  return {keeper, ChildrenOf(keeper), RunIdOf(keeper)};
}

// Everything a sandbox held is gone: keeper and its children, state dir, run dir, cgroups.
void ExpectNoTrace(const std::string& name, pid_t keeper, const std::vector<pid_t>& children, const std::string& run_id) {
  EXPECT_FALSE(std::filesystem::exists(std::string(kSandboxes) + "/" + name)) << "state dir left";
  WaitUntil([&] { return !Running(keeper); }, std::chrono::seconds(5));
  EXPECT_FALSE(Running(keeper)) << "keeper left running";
  for (pid_t child : children) {
    WaitUntil([&] { return !Running(child); }, std::chrono::seconds(5));
    EXPECT_FALSE(Running(child)) << "the keeper's child " << child << " left running";
  }
  ASSERT_FALSE(run_id.empty());
  EXPECT_FALSE(std::filesystem::exists(std::string(kRuns) + "/" + run_id)) << "run dir left";
  EXPECT_EQ(CgroupsNamed(run_id), std::vector<std::string>{}) << "cgroups left";
}

TEST(Persistent, create_exec_ls_rm_keep_state_between_execs_and_leave_nothing) {
  std::string marker = RandomToken();
  std::string name;
  pid_t keeper = 0;
  std::vector<pid_t> children;
  std::string run_id;
  {
    Sandbox box({"--backend", "ns", "-e", "GREETING=" + marker});
    name = box.name();
    ASSERT_EQ(box.created().exit_code, 0) << box.created().out << box.created().err;
    EXPECT_EQ(box.created().result.value("status", ""), "created");
    EXPECT_EQ(box.created().result.value("backend", ""), "ns");
    // The sandbox outlives the CLI that created it.
    keeper = KeeperPid(name);
    ASSERT_GT(keeper, 0);
    EXPECT_TRUE(Running(keeper));
    children = ChildrenOf(keeper);
    EXPECT_EQ(children.size(), 1u) << "the agent";
    run_id = RunIdOf(keeper);
    EXPECT_FALSE(run_id.empty());
    EXPECT_EQ(Listed(name).value("status", ""), "running");
    auto first = Exec(name, {}, {kPython, "-c", "import os\nopen('/tmp/kept', 'w').write(os.environ['GREETING'])\nprint(42)"});
    ASSERT_EQ(first.result.value("status", ""), "exited") << first.out << first.err;
    EXPECT_EQ(first.result["stdout"], "42\n");
    EXPECT_EQ(first.result["backend"], "ns");
    auto second = Exec(name, {"-e", "EXTRA=1"}, {"/bin/sh", "-c", "cat /tmp/kept; echo \" $EXTRA\""});
    EXPECT_EQ(second.result.value("stdout", ""), marker + " 1\n") << second.out << second.err;
    auto exit_code = Exec(name, {}, {"/bin/sh", "-c", "exit 7"});
    EXPECT_EQ(exit_code.exit_code, 7);
    auto rm = RunSmolbox({"rm", name});
    EXPECT_EQ(rm.exit_code, 0) << rm.err;
    EXPECT_TRUE(Listed(name).is_null());
  }
  ExpectNoTrace(name, keeper, children, run_id);
}

TEST(Persistent, each_exec_has_its_own_timeout_and_the_sandbox_survives_it) {
  Sandbox box({"--backend", "ns", "--timeout", "30s"});
  ASSERT_EQ(box.created().exit_code, 0) << box.created().err;
  auto start = std::chrono::steady_clock::now();
  auto slow = Exec(box.name(), {"--timeout", "1s"}, {kPython, "-c", "while True: pass"});
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(slow.result.value("status", ""), "timeout") << slow.out << slow.err;
  EXPECT_EQ(slow.exit_code, 124);
  EXPECT_LT(seconds, 5.0);
  auto next = Exec(box.name(), {}, {"/bin/echo", "alive"});
  EXPECT_EQ(next.result.value("stdout", ""), "alive\n") << next.out << next.err;
}

TEST(Persistent, sandbox_wide_limits_hold_in_each_exec_and_are_judged_per_exec) {
  Sandbox box({"--backend", "ns", "--mem", "64M", "--pids", "16", "--cpu-time", "1s"});
  ASSERT_EQ(box.created().exit_code, 0) << box.created().err;
  auto hog = Exec(box.name(), {}, {kPython, "-c", "b = bytearray(160 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1"});
  EXPECT_EQ(hog.result.value("status", ""), "memory_limit") << hog.out << hog.err;
  auto bomb = Exec(box.name(), {}, {"/bin/sh", "-c", "for i in $(seq 40); do sleep 2 & done; wait"});
  EXPECT_NE(bomb.result["limits_hit"].dump().find("pids"), std::string::npos) << bomb.out;
  // Four spinners, each under its own RLIMIT_CPU, are together over the limit: only the host's
  // cgroup check sees that, and the sandbox lives on after it.
  auto spinners = Exec(box.name(), {}, {"/bin/sh", "-c", "for i in 1 2 3 4; do (while :; do :; done) & done; wait"});
  EXPECT_EQ(spinners.result.value("status", ""), "cpu_limit") << spinners.out << spinners.err;
  EXPECT_LT(spinners.seconds, 10.0);
  EXPECT_EQ(Listed(box.name()).value("status", ""), "running");
  auto next = Exec(box.name(), {}, {"/bin/echo", "ok"});
  EXPECT_EQ(next.result.value("status", ""), "exited") << next.out << next.err;
  EXPECT_EQ(next.result["limits_hit"], nlohmann::json::array()) << "an earlier exec's limit hit is not this one's";
}

TEST(Persistent, a_second_exec_while_one_runs_is_told_the_sandbox_is_busy) {
  Sandbox box({"--backend", "ns"});
  ASSERT_EQ(box.created().exit_code, 0) << box.created().err;
  std::thread slow([&] { Exec(box.name(), {}, {"/bin/sleep", "3"}); });
  WaitUntil([&] { return Listed(box.name()).value("status", "") == "busy"; }, std::chrono::seconds(3));
  EXPECT_EQ(Listed(box.name()).value("status", ""), "busy");
  auto second = Exec(box.name(), {}, {"/bin/echo", "second"});
  EXPECT_EQ(second.exit_code, 125);
  EXPECT_EQ(second.result.value("status", ""), "setup_error");
  EXPECT_NE(second.result.value("error", "").find("busy"), std::string::npos) << second.out;
  auto rm = RunSmolbox({"rm", box.name()});
  EXPECT_EQ(rm.exit_code, 125);
  EXPECT_NE(rm.err.find("--force"), std::string::npos) << rm.err;
  slow.join();
  auto after = Exec(box.name(), {}, {"/bin/echo", "after"});
  EXPECT_EQ(after.result.value("stdout", ""), "after\n") << after.err;
}

// Chaos in an exec: the keeper, or the sandbox's agent (the keeper's child, PID 1 inside), is
// SIGKILLed at a random point of an exec, ten times each. The exec must end (never hang) with
// its output or an error naming what died; the workload must not outlive it; the sandbox is
// listed dead with a reason, refuses the next exec, and rm leaves nothing of it.
TEST(Persistent, sigkill_of_the_keeper_or_the_agent_mid_exec_ends_the_exec_and_rm_leaves_nothing) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> delay_ms(0, 400);
  for (int trial = 0; trial < 20; ++trial) {
    bool kill_agent = trial % 2 == 1;
    std::string token = RandomToken();
    Sandbox box({"--backend", "ns"});
    ASSERT_EQ(box.created().exit_code, 0) << box.created().err;
    auto [keeper, children, run_id] = HoldingsOf(box.name());
    ASSERT_FALSE(children.empty()) << "the keeper has no agent";
    int delay = delay_ms(rng);
    std::string context = fmt::format("trial {}: {} killed after {} ms", trial, kill_agent ? "agent" : "keeper", delay);
    Invocation exec;
    std::thread client([&] {
      exec = Exec(box.name(), {"--timeout", "30s"},
                  {kPython, "-c", "import sys, time; print(sys.argv[1], flush=True); time.sleep(1); print('done')", token});
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    kill(kill_agent ? children.front() : keeper, SIGKILL);
    client.join();
    std::string status = exec.result.value("status", "");
    if (status == "exited") {
      EXPECT_EQ(exec.result.value("stdout", ""), token + "\ndone\n") << context;
    } else {
      EXPECT_TRUE(status == "internal_error" || status == "setup_error") << context << ": " << exec.out << exec.err;
      EXPECT_FALSE(exec.result.value("error", "").empty()) << context;
    }
    EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(token) == 0; }, std::chrono::seconds(10)))
        << context << ": the workload outlived what was killed";
    EXPECT_TRUE(WaitUntil([&] { return Listed(box.name()).value("status", "") == "dead"; }, std::chrono::seconds(10)))
        << context << ": " << Listed(box.name()).dump();
    EXPECT_FALSE(Listed(box.name()).value("reason", "").empty()) << context;
    EXPECT_EQ(Exec(box.name(), {}, {"/bin/true"}).exit_code, 125) << context;
    auto rm = RunSmolbox({"rm", box.name()});
    EXPECT_EQ(rm.exit_code, 0) << context << ": " << rm.err;
    ExpectNoTrace(box.name(), keeper, children, run_id);
  }
}

// An operator's `rm -rf` of the state (or a cleaner's) leaves no way to reach the sandbox, not
// even for `smolbox rm`: the keeper sees it and ends the sandbox itself rather than live on unseen.
TEST(Persistent, removing_its_state_directory_or_control_socket_ends_the_sandbox_and_leaves_nothing) {
  for (bool whole_dir : {true, false}) {
    std::string what = whole_dir ? "its state directory" : "its control socket";
    Sandbox box({"--backend", "ns"});
    ASSERT_EQ(box.created().exit_code, 0) << box.created().err;
    auto [keeper, children, run_id] = HoldingsOf(box.name());
    ASSERT_FALSE(children.empty()) << "the keeper has no agent";
    std::string dir = std::string(kSandboxes) + "/" + box.name();
    std::error_code removed;
    if (whole_dir) {
      std::filesystem::remove_all(dir, removed);
    } else {
      std::filesystem::remove(dir + "/control.sock", removed);
    }
    EXPECT_FALSE(removed) << "removing " << what << ": " << removed.message();
    EXPECT_TRUE(WaitUntil([&] { return !Running(keeper); }, std::chrono::seconds(10)))
        << "the keeper lived on after " << what << " was removed";
    for (pid_t child : children) {
      EXPECT_TRUE(WaitUntil([&] { return !Running(child); }, std::chrono::seconds(5))) << what << ": agent left";
    }
    if (!whole_dir) {
      auto listed = Listed(box.name());
      EXPECT_EQ(listed.value("status", ""), "dead") << listed;
      EXPECT_NE(listed.value("reason", "").find("keeper process is gone"), std::string::npos) << listed;
      auto rm = RunSmolbox({"rm", box.name()});
      EXPECT_EQ(rm.exit_code, 0) << rm.err;
    }
    ExpectNoTrace(box.name(), keeper, children, run_id);
  }
}

// A keeper that is stopped (SIGSTOP, a debugger) cannot answer. The agent still ends the
// workload at its timeout; the client gives up a margin past it, saying why, instead of waiting
// as long as the keeper stays stopped. Once continued, the sandbox serves again.
TEST(Persistent, a_stopped_keeper_holds_its_exec_client_no_longer_than_the_timeout_and_a_margin) {
  Sandbox box({"--backend", "ns"});
  ASSERT_EQ(box.created().exit_code, 0) << box.created().err;
  pid_t keeper = KeeperPid(box.name());
  std::string token = RandomToken();
  Invocation exec;
  std::atomic<bool> returned{false};
  std::thread client([&] {
    exec = Exec(box.name(), {"--timeout", "2s"},
                {kPython, "-c", "import sys, time; print(sys.argv[1], flush=True); time.sleep(60)", token});
    returned = true;
  });
  // At a random point of the exec: before the keeper has passed it on, or while it runs.
  std::this_thread::sleep_for(RandomDelay(0, 1500));
  kill(keeper, SIGSTOP);
  // A client that waits for as long as the keeper is stopped would hang the test: continue the
  // keeper well past the margin, and let the timing below fail instead.
  WaitUntil([&] { return returned.load(); }, std::chrono::seconds(45));
  kill(keeper, SIGCONT);
  client.join();
  EXPECT_EQ(exec.exit_code, 125) << exec.out << exec.err;
  EXPECT_EQ(exec.result.value("status", ""), "internal_error") << exec.out;
  EXPECT_NE(exec.result.value("error", "").find("stopped (SIGSTOP)"), std::string::npos) << exec.out;
  EXPECT_LT(exec.seconds, 35.0) << "the client waited for the stopped keeper";
  EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(token) == 0; }, std::chrono::seconds(10)))
      << "the workload outlived its timeout";
  Invocation next;
  EXPECT_TRUE(WaitUntil([&] { return (next = Exec(box.name(), {}, {"/bin/echo", "again"})).exit_code == 0; },
                        std::chrono::seconds(20)))
      << next.out << next.err;
  EXPECT_EQ(next.result.value("stdout", ""), "again\n");
}

// A stopped agent (PID 1 of an ns sandbox) cannot end the workload at its timeout: the host's
// backstop kills the sandbox at the timeout plus its grace, the exec ends as a timeout that says
// so, and the sandbox is dead, naming the signal.
TEST(Persistent, a_stopped_agent_is_ended_by_the_host_backstop_and_the_sandbox_is_dead) {
  Sandbox box({"--backend", "ns"});
  ASSERT_EQ(box.created().exit_code, 0) << box.created().err;
  auto [keeper, children, run_id] = HoldingsOf(box.name());
  ASSERT_FALSE(children.empty()) << "the keeper has no agent";
  std::string token = RandomToken();
  Invocation exec;
  std::thread client([&] {
    exec = Exec(box.name(), {"--timeout", "2s"},
                {kPython, "-c", "import sys, time; print(sys.argv[1], flush=True); time.sleep(60)", token});
  });
  std::this_thread::sleep_for(RandomDelay(0, 1000));
  kill(children.front(), SIGSTOP);
  client.join();
  EXPECT_EQ(exec.result.value("status", ""), "timeout") << exec.out;
  EXPECT_NE(exec.result.value("warnings", nlohmann::json::array()).dump().find("host backstop"), std::string::npos)
      << exec.out;
  EXPECT_LT(exec.seconds, 15.0);
  EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(token) == 0; }, std::chrono::seconds(10)));
  auto listed = Listed(box.name());
  EXPECT_EQ(listed.value("status", ""), "dead") << listed;
  EXPECT_NE(listed.value("reason", "").find("SIGKILL"), std::string::npos) << listed;
  auto rm = RunSmolbox({"rm", box.name()});
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  ExpectNoTrace(box.name(), keeper, children, run_id);
}

// The kernel's start time of pid (field 22 of /proc/<pid>/stat), as a keeper records its own.
unsigned long long StartTimeOf(pid_t pid) {
  std::string stat = ReadFileOrEmpty(fmt::format("/proc/{}/stat", pid));
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) return std::stoull(field);
  }
  return 0;
}

// info.json forged (a process of the same user that is not the keeper, with its true start
// time) or broken: the sandbox is listed dead, exec is refused, and rm removes it without
// killing the process it names. The real keeper, whose directory rm removes, ends its sandbox.
TEST(Persistent, a_forged_or_broken_info_json_never_gets_another_process_killed_and_rm_cleans_up) {
  pid_t bystander = fork();
  ASSERT_GE(bystander, 0);
  if (bystander == 0) {
    execl("/bin/sleep", "sleep", "120", nullptr);
    _exit(127);
  }
  ASSERT_TRUE(WaitUntil([&] { return ReadFileOrEmpty(fmt::format("/proc/{}/comm", bystander)) == "sleep\n"; },
                        std::chrono::seconds(5)));
  std::string forged = nlohmann::json{{"backend", "ns"}, {"isolation", "namespaces"}, {"created", "2026-01-01T00:00:00Z"},
                                      {"keeper_pid", bystander}, {"keeper_start_time", StartTimeOf(bystander)},
                                      {"exec_timeout_ms", 30000}}.dump();
  for (const std::string& info : {forged, std::string("{not json"), std::string(R"({"keeper_pid": "1"})")}) {
    Sandbox box({"--backend", "ns"});
    ASSERT_EQ(box.created().exit_code, 0) << box.created().err;
    auto [keeper, children, run_id] = HoldingsOf(box.name());
    WriteFile(std::string(kSandboxes) + "/" + box.name() + "/info.json", info);
    EXPECT_EQ(Listed(box.name()).value("status", ""), "dead") << info << ": " << Listed(box.name()).dump();
    auto exec = Exec(box.name(), {}, {"/bin/true"});
    EXPECT_EQ(exec.exit_code, 125) << info << ": " << exec.out << exec.err;
    auto rm = RunSmolbox({"rm", box.name()});
    EXPECT_EQ(rm.exit_code, 0) << info << ": " << rm.err;
    EXPECT_TRUE(Running(bystander)) << "rm killed the process a forged info.json named";
    ExpectNoTrace(box.name(), keeper, children, run_id);
  }
  kill(bystander, SIGKILL);
  waitpid(bystander, nullptr, 0);
}

// A process that is not smolbox holding a sandbox's lock (one of the same user's: no other user
// can reach the sandboxes' directory, 0700) makes the sandbox busy, not broken: exec and rm are
// refused as busy, and rm --force still removes all of it.
TEST(Persistent, a_foreign_lock_holder_makes_it_busy_and_rm_force_still_removes_it) {
  Sandbox box({"--backend", "ns"});
  ASSERT_EQ(box.created().exit_code, 0) << box.created().err;
  pid_t keeper = KeeperPid(box.name());
  UniqueFd lock_fd(open((std::string(kSandboxes) + "/" + box.name() + "/lock").c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(lock_fd.valid());
  struct flock lock{};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  ASSERT_EQ(fcntl(lock_fd.get(), F_OFD_SETLK, &lock), 0);
  EXPECT_EQ(Listed(box.name()).value("status", ""), "busy");
  auto exec = Exec(box.name(), {}, {"/bin/echo", "ran"});
  EXPECT_EQ(exec.exit_code, 125);
  EXPECT_NE(exec.result.value("error", "").find("busy"), std::string::npos) << exec.out;
  auto rm = RunSmolbox({"rm", box.name()});
  EXPECT_EQ(rm.exit_code, 125);
  EXPECT_NE(rm.err.find("--force"), std::string::npos) << rm.err;
  auto forced = RunSmolbox({"rm", "--force", box.name()});
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_FALSE(std::filesystem::exists(std::string(kSandboxes) + "/" + box.name()));
  WaitUntil([&] { return !Running(keeper); }, std::chrono::seconds(10));
  EXPECT_FALSE(Running(keeper)) << "the keeper outlived rm --force";
}

TEST(Persistent, listing_a_sandbox_never_makes_an_exec_that_starts_meanwhile_busy) {
  Sandbox box({"--backend", "ns"});
  ASSERT_EQ(box.created().exit_code, 0) << box.created().err;
  auto dir = persist::OpenSandboxDir(box.name());
  ASSERT_TRUE(dir) << dir.error().ToString();
  std::atomic<bool> done{false};
  int listings = 0;
  std::thread lister([&] {
    for (; !done; ++listings) EXPECT_NE(persist::Inspect(box.name(), dir->get()).status, persist::SandboxStatus::kDead);
  });
  for (int i = 0; i < 20; ++i) {
    auto exec = Exec(box.name(), {}, {"/bin/echo", "not busy"});
    EXPECT_EQ(exec.result.value("stdout", ""), "not busy\n") << "exec " << i << ": " << exec.out << exec.err;
  }
  done = true;
  lister.join();
  EXPECT_GT(listings, 100) << "the listings must overlap the execs";
}

// Ten creates of one name at once: exactly one wins, the other nine get the clash's error, and
// the winner is whole and serves an exec.
TEST(Persistent, ten_concurrent_creates_of_one_name_make_exactly_one_sandbox) {
  std::string name = NewName();
  std::vector<Invocation> creates(10);
  std::vector<std::thread> threads;
  for (Invocation& create : creates) {
    threads.emplace_back([&create, &name] { create = RunSmolbox({"create", "--backend", "ns", name}); });
  }
  for (std::thread& thread : threads) thread.join();
  int won = 0;
  for (const Invocation& create : creates) {
    if (create.exit_code == 0) {
      ++won;
      continue;
    }
    EXPECT_EQ(create.exit_code, 125) << create.err;
    EXPECT_NE(create.err.find("a sandbox named \"" + name + "\" already exists"), std::string::npos) << create.err;
  }
  EXPECT_EQ(won, 1);
  EXPECT_EQ(Listed(name).value("status", ""), "running");
  auto exec = Exec(name, {}, {"/bin/sh", "-c", "echo one"});
  EXPECT_EQ(exec.result.value("stdout", ""), "one\n") << exec.out << exec.err;
  EXPECT_EQ(RunSmolbox({"rm", name}).exit_code, 0);
  EXPECT_TRUE(Listed(name).is_null());
}

TEST(Persistent, name_clash_unknown_name_bad_name_and_a_command_to_create_are_clear_errors) {
  Sandbox box({"--backend", "ns"});
  ASSERT_EQ(box.created().exit_code, 0) << box.created().err;
  auto clash = RunSmolbox({"create", box.name()});
  EXPECT_EQ(clash.exit_code, 125);
  EXPECT_NE(clash.err.find("already exists"), std::string::npos) << clash.err;
  EXPECT_EQ(Listed(box.name()).value("status", ""), "running") << "the clash must not hurt the first";
  std::string unknown = NewName();
  for (const auto& args : std::vector<std::vector<std::string>>{{"exec", unknown, "--", "/bin/true"}, {"rm", unknown}}) {
    auto run = RunSmolbox(args);
    EXPECT_EQ(run.exit_code, 125);
    EXPECT_NE(run.err.find("no sandbox named"), std::string::npos) << run.err;
  }
  for (const char* bad : {"../escape", ".hidden", "a/b", ""}) {
    auto run = RunSmolbox({"create", bad});
    EXPECT_EQ(run.exit_code, 125) << bad;
    EXPECT_NE(run.err.find("name"), std::string::npos) << run.err;
  }
  EXPECT_FALSE(std::filesystem::exists("/run/smolbox/escape"));
  auto with_command = RunSmolbox({"create", NewName(), "--", "/bin/true"});
  EXPECT_EQ(with_command.exit_code, 125);
  auto bad_limit = RunSmolbox({"create", NewName(), "--mem", "1T"});
  EXPECT_EQ(bad_limit.exit_code, 125);
  EXPECT_NE(bad_limit.err.find("memory"), std::string::npos) << bad_limit.err;
  auto bad_env = RunSmolbox({"exec", box.name(), "-e", "NO_VALUE", "--", "/bin/true"});
  EXPECT_EQ(bad_env.exit_code, 125);
  EXPECT_NE(bad_env.err.find("--env"), std::string::npos) << bad_env.err;
}

TEST(Persistent, a_sandbox_whose_agent_died_is_dead_refuses_execs_and_rm_cleans_it_up) {
  Sandbox box({"--backend", "ns"});
  ASSERT_EQ(box.created().exit_code, 0) << box.created().err;
  auto [keeper, children, run_id] = HoldingsOf(box.name());
  ASSERT_EQ(children.size(), 1u);
  kill(children[0], SIGKILL);
  WaitUntil([&] { return Listed(box.name()).value("status", "") == "dead"; }, std::chrono::seconds(5));
  auto listed = Listed(box.name());
  EXPECT_EQ(listed.value("status", ""), "dead") << listed;
  EXPECT_NE(listed.value("reason", "").find("agent"), std::string::npos) << listed;
  auto exec = Exec(box.name(), {}, {"/bin/true"});
  EXPECT_EQ(exec.exit_code, 125);
  EXPECT_NE(exec.result.value("error", "").find("is dead"), std::string::npos) << exec.out;
  EXPECT_NE(exec.result.value("error", "").find("smolbox rm"), std::string::npos) << exec.out;
  auto rm = RunSmolbox({"rm", box.name()});
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  ExpectNoTrace(box.name(), keeper, children, run_id);
}

TEST(Persistent, a_killed_keeper_shows_dead_takes_its_agent_along_and_rm_cleans_up) {
  Sandbox box({"--backend", "ns"});
  ASSERT_EQ(box.created().exit_code, 0) << box.created().err;
  auto [keeper, children, run_id] = HoldingsOf(box.name());
  kill(keeper, SIGKILL);
  WaitUntil([&] { return !Running(keeper); }, std::chrono::seconds(10));
  auto listed = Listed(box.name());
  EXPECT_EQ(listed.value("status", ""), "dead") << listed;
  EXPECT_NE(listed.value("reason", "").find("keeper"), std::string::npos) << listed;
  auto rm = RunSmolbox({"rm", box.name()});
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  ExpectNoTrace(box.name(), keeper, children, run_id);
}

TEST(Persistent, rm_force_ends_a_sandbox_in_the_middle_of_an_exec) {
  Sandbox box({"--backend", "ns"});
  ASSERT_EQ(box.created().exit_code, 0) << box.created().err;
  auto [keeper, children, run_id] = HoldingsOf(box.name());
  Invocation slow;
  std::thread exec([&] { slow = Exec(box.name(), {}, {"/bin/sleep", "30"}); });
  WaitUntil([&] { return Listed(box.name()).value("status", "") == "busy"; }, std::chrono::seconds(3));
  auto rm = RunSmolbox({"rm", "--force", box.name()});
  exec.join();
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_LT(slow.seconds, 10.0);
  EXPECT_EQ(slow.exit_code, 125) << slow.out << slow.err;
  ExpectNoTrace(box.name(), keeper, children, run_id);
}

// `smolbox exec` of a Python that sleeps for up to a minute, with marker among its arguments.
pid_t SpawnSleepingExec(const std::string& name, const std::string& marker) {
  pid_t client = fork();
  if (client == 0) {
    int null_fd = open("/dev/null", O_RDWR);
    dup2(null_fd, 1);
    dup2(null_fd, 2);
    execl(SmolboxPath().c_str(), "smolbox", "exec", "--timeout", "60s", name.c_str(), "--", kPython, "-c",
          "import time\nwhile True: time.sleep(1)", marker.c_str(), nullptr);
    _exit(99);
  }
  return client;
}

TEST(Persistent, an_exec_whose_caller_is_interrupted_ends_and_the_sandbox_serves_the_next) {
  Sandbox box({"--backend", "ns"});
  ASSERT_EQ(box.created().exit_code, 0) << box.created().err;
  std::string marker = RandomToken();
  pid_t client = SpawnSleepingExec(box.name(), marker);
  // The client's own command line holds the marker too.
  WaitUntil([&] { return CountProcessesWith(marker) >= 2; }, std::chrono::seconds(10));
  ASSERT_GE(CountProcessesWith(marker), 2) << "the workload never started";
  kill(client, SIGINT);  // Ctrl-C
  waitpid(client, nullptr, 0);
  WaitUntil([&] { return CountProcessesWith(marker) == 0; }, std::chrono::seconds(5));
  EXPECT_EQ(CountProcessesWith(marker), 0) << "the workload outlived its caller";
  EXPECT_EQ(Listed(box.name()).value("status", ""), "running");
  auto next = Exec(box.name(), {}, {"/bin/echo", "next"});
  EXPECT_EQ(next.result.value("stdout", ""), "next\n") << next.out << next.err;
  EXPECT_LT(next.seconds, 5.0);
}

TEST(Persistent, rw_volumes_copy_back_after_each_exec_and_ro_ones_stay_read_only) {
  TempDir out;
  TempDir in;
  in.Write("input.txt", "data");
  Sandbox box({"--backend", "ns", "-v", out.path() + ":/out", "-v", in.path() + ":/in:ro"});
  ASSERT_EQ(box.created().exit_code, 0) << box.created().err;
  auto first = Exec(box.name(), {}, {"/bin/sh", "-c", "cp /in/input.txt /out/first.txt"});
  ASSERT_EQ(first.result.value("status", ""), "exited") << first.out << first.err;
  EXPECT_EQ(ReadFileOrEmpty(out.path() + "/first.txt"), "data") << "copied back before rm";
  auto second = Exec(box.name(), {}, {"/bin/sh", "-c", "echo two > /out/second.txt; echo x > /in/nope"});
  EXPECT_NE(second.result.value("exit_code", 0), 0);
  EXPECT_EQ(ReadFileOrEmpty(out.path() + "/second.txt"), "two\n");
  EXPECT_FALSE(std::filesystem::exists(in.path() + "/nope"));
}

TEST(Persistent, stdin_and_binary_output_travel_byte_for_byte) {
  TempDir dir;
  std::string input = "line one\nzwei \xc3\xa4\n";
  std::string path = dir.Write("stdin.txt", input);
  Sandbox box({"--backend", "ns"});
  ASSERT_EQ(box.created().exit_code, 0) << box.created().err;
  auto cat = RunSmolbox({"exec", "--stdin", path, box.name(), "--", "/bin/cat"});
  EXPECT_EQ(cat.out, input);
  auto binary = RunSmolbox({"exec", box.name(), "--", "/usr/bin/printf", "\\377\\000\\376"});
  EXPECT_EQ(binary.out, std::string("\xff\0\xfe", 3));
}

// The keeper streams: from the client's stdin, which came to it as a descriptor, and to the
// client's stdout, as the workload writes it. The workload waits for stdin that is sent only
// once its first line has arrived.
TEST(Persistent, exec_streams_output_as_written_and_a_gibibyte_of_interactive_stdin_with_a_small_keeper) {
  Sandbox box({"--backend", "ns"});
  ASSERT_EQ(box.created().exit_code, 0) << box.created().err;
  LiveSmolbox exec({"exec", "-i", "--timeout", "120s", box.name(), "--", "/bin/sh", "-c", "echo a; wc -c; sleep 2"});
  EXPECT_EQ(exec.ReadStdoutUntil("a\n", std::chrono::seconds(30)), "a\n");
  constexpr int64_t kGiB = 1LL << 30;
  ASSERT_TRUE(exec.WriteZeros(kGiB, std::chrono::seconds(120)));
  exec.CloseStdin();
  EXPECT_EQ(exec.ReadStdoutUntil("\n" + std::to_string(kGiB) + "\n", std::chrono::seconds(60)),
            "a\n" + std::to_string(kGiB) + "\n");
  std::string status = ReadFileOrEmpty(fmt::format("/proc/{}/status", KeeperPid(box.name())));
  long keeper_peak_kib = std::stol(status.substr(status.find("VmHWM:") + 6));
  EXPECT_LT(keeper_peak_kib, 64 * 1024);
  EXPECT_EQ(exec.Wait(std::chrono::seconds(30)), 0) << exec.err();
}

TEST(Persistent, an_unprivileged_user_gets_a_persistent_sandbox_of_its_own) {
  constexpr uid_t kNobody = 65534;
  std::string name = NewName();
  auto create = RunSmolbox({"create", name, "--backend", "ns"}, {}, kNobody);
  ASSERT_EQ(create.exit_code, 0) << create.err;
  auto exec = RunSmolbox({"exec", name, "--", kPython, "-c", "import os; print(os.getuid())"}, {}, kNobody);
  EXPECT_EQ(exec.out, "1000\n") << exec.err;
  // Root's view does not list another user's sandboxes.
  EXPECT_TRUE(Listed(name).is_null());
  auto rm = RunSmolbox({"rm", name}, {}, kNobody);
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  auto gone = RunSmolbox({"exec", name, "--", "/bin/true"}, {}, kNobody);
  EXPECT_NE(gone.err.find("no sandbox named"), std::string::npos) << gone.err;
}

TEST(Persistent, removing_50_sandboxes_in_a_row_leaks_no_fd_mount_cgroup_loop_device_or_process) {
  constexpr int kCount = 50;
  size_t mounts_before = CountLines("/proc/self/mountinfo");
  size_t loops_before = CountBoundLoopDevices();
  std::vector<std::string> names;
  std::vector<pid_t> keepers;
  std::set<std::string> run_ids;
  for (int i = 0; i < kCount; ++i) {
    names.push_back(NewName());
    auto create = RunSmolbox({"create", names.back(), "--backend", "ns", "--storage", "8M"});
    ASSERT_EQ(create.exit_code, 0) << create.err;
    keepers.push_back(KeeperPid(names.back()));
    run_ids.insert(RunIdOf(keepers.back()));
  }
  ASSERT_EQ(run_ids.size(), static_cast<size_t>(kCount));
  auto ours = [&] {
    std::vector<std::string> found;
    for (const auto& path : CgroupsNamed("smolbox-")) {
      std::string name = std::filesystem::path(path).filename();
      if (run_ids.contains(name.substr(std::string("smolbox-").size()))) found.push_back(path);
    }
    return found;
  };
  EXPECT_GE(ours().size(), static_cast<size_t>(kCount)) << "each sandbox has its cgroups";
  // Removed by this process, through the same call smolbox rm makes, so that its fds count.
  size_t fds_before = OpenFdCount();
  for (const auto& name : names) {
    auto removed = persist::RemoveSandbox(name, false);
    EXPECT_TRUE(removed) << name << ": " << (removed ? "" : removed.error().ToString());
  }
  EXPECT_EQ(OpenFdCount(), fds_before);
  for (pid_t keeper : keepers) {
    WaitUntil([&] { return !Running(keeper); }, std::chrono::seconds(2));
    EXPECT_FALSE(Running(keeper));
  }
  EXPECT_EQ(CountLines("/proc/self/mountinfo"), mounts_before);
  // Host-wide: tests run one at a time, so no other runtime holds a loop device meanwhile.
  EXPECT_EQ(CountBoundLoopDevices(), loops_before);
  EXPECT_EQ(ours(), std::vector<std::string>{});
  for (const auto& id : run_ids) EXPECT_FALSE(std::filesystem::exists(std::string(kRuns) + "/" + id));
  for (const auto& name : names) EXPECT_FALSE(std::filesystem::exists(std::string(kSandboxes) + "/" + name));
}

// The vm backend under TCG: the keeper holds a running VM; each exec is a warm one.
TEST(PersistentVm, a_vm_sandbox_serves_warm_execs_keeps_its_state_and_dies_with_its_qemu) {
  Sandbox box({"--backend", "vm", "--accel", "tcg", "--mem", "128M"});
  ASSERT_EQ(box.created().exit_code, 0) << box.created().out << box.created().err;
  EXPECT_EQ(box.created().result.value("isolation", ""), "tcg");
  auto [keeper, children, run_id] = HoldingsOf(box.name());
  ASSERT_EQ(children.size(), 1u) << "QEMU";
  EXPECT_NE(ReadFileOrEmpty(fmt::format("/proc/{}/cmdline", children[0])).find("qemu"), std::string::npos);
  auto first = Exec(box.name(), {}, {kPython, "-c", "open('/tmp/kept', 'w').write('kept')\nprint(42)"});
  ASSERT_EQ(first.result.value("status", ""), "exited") << first.out << first.err;
  EXPECT_EQ(first.result["stdout"], "42\n");
  EXPECT_EQ(first.result["backend"], "vm");
  EXPECT_EQ(first.result["timings"]["boot_ms"], 0) << "no boot in a warm exec";
  // Without --json the keeper streams to the client's own stdout and stderr, and -i in.
  TempDir dir;
  auto streamed = RunSmolbox({"exec", "--stdin", dir.Write("in", "piped\n"), box.name(), "--", "/bin/sh", "-c",
                              "cat; echo err >&2"});
  EXPECT_EQ(streamed.out, "piped\n") << streamed.err;
  EXPECT_NE(streamed.err.find("err\n"), std::string::npos) << streamed.err;
  auto second = Exec(box.name(), {"--timeout", "1s"}, {"/bin/sh", "-c", "cat /tmp/kept; sleep 10"});
  EXPECT_EQ(second.result.value("status", ""), "timeout") << second.out;
  EXPECT_EQ(second.result.value("stdout", ""), "kept");
  // An interrupted caller's exec ends in the guest too: the next one neither waits for it nor
  // finds it running.
  std::string marker = RandomToken();
  pid_t client = SpawnSleepingExec(box.name(), marker);
  WaitUntil([&] { return Listed(box.name()).value("status", "") == "busy"; }, std::chrono::seconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // until the guest runs it
  kill(client, SIGINT);
  waitpid(client, nullptr, 0);
  std::string count_marked = fmt::format(
      "import os\nm = '{}' + '{}'\nn = 0\nfor p in os.listdir('/proc'):\n"
      "  try: n += p.isdigit() and m in open('/proc/' + p + '/cmdline').read()\n"
      "  except OSError: pass\nprint(n)",
      marker.substr(0, 4), marker.substr(4));
  auto after = Exec(box.name(), {}, {kPython, "-c", count_marked});
  EXPECT_EQ(after.result.value("stdout", ""), "0\n") << after.out << after.err;
  EXPECT_LT(after.seconds, 10.0) << "waited for the interrupted exec";
  kill(children[0], SIGKILL);
  WaitUntil([&] { return Listed(box.name()).value("status", "") == "dead"; }, std::chrono::seconds(5));
  auto listed = Listed(box.name());
  EXPECT_EQ(listed.value("status", ""), "dead") << listed;
  EXPECT_NE(listed.value("reason", "").find("QEMU"), std::string::npos) << listed;
  auto rm = RunSmolbox({"rm", box.name()});
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  ExpectNoTrace(box.name(), keeper, children, run_id);
}

// QEMU killed or stopped in the middle of an exec. Killed: the exec ends at once naming QEMU and
// the signal, and the sandbox is listed dead with the same reason. Stopped: the guest cannot end
// the workload, so the host's backstop does, at the timeout plus its grace, and the sandbox is
// dead. Either way rm leaves nothing.
TEST(PersistentVm, qemu_killed_or_stopped_mid_exec_ends_the_exec_and_rm_leaves_nothing) {
  for (int signal : {SIGKILL, SIGSTOP}) {
    std::string context = signal == SIGKILL ? "QEMU killed" : "QEMU stopped";
    Sandbox box({"--backend", "vm", "--accel", "tcg", "--mem", "128M"});
    ASSERT_EQ(box.created().exit_code, 0) << box.created().out << box.created().err;
    auto [keeper, children, run_id] = HoldingsOf(box.name());
    ASSERT_EQ(children.size(), 1u) << "QEMU";
    Invocation exec;
    std::thread client([&] { exec = Exec(box.name(), {"--timeout", "3s"}, {"/bin/sh", "-c", "echo started; sleep 60"}); });
    std::this_thread::sleep_for(RandomDelay(0, 2500));  // the guest starts it after about a second
    kill(children[0], signal);
    client.join();
    if (signal == SIGKILL) {
      // Killed before the keeper took the exec, it is refused as dead; after, it ends as broken.
      std::string status = exec.result.value("status", "");
      EXPECT_TRUE(status == "internal_error" || status == "setup_error") << context << ": " << exec.out;
      EXPECT_NE(exec.result.value("error", "").find("QEMU"), std::string::npos) << context << ": " << exec.out;
      EXPECT_NE(exec.result.value("error", "").find("SIGKILL"), std::string::npos) << context << ": " << exec.out;
      EXPECT_LT(exec.seconds, 3.0) << context << ": the exec waited for its timeout";
    } else {
      EXPECT_EQ(exec.result.value("status", ""), "timeout") << context << ": " << exec.out;
      EXPECT_LT(exec.seconds, 30.0) << context;
    }
    EXPECT_TRUE(WaitUntil([&] { return Listed(box.name()).value("status", "") == "dead"; }, std::chrono::seconds(10)))
        << context << ": " << Listed(box.name()).dump();
    EXPECT_NE(Listed(box.name()).value("reason", "").find("QEMU"), std::string::npos) << context;
    EXPECT_EQ(Exec(box.name(), {}, {"/bin/true"}).exit_code, 125) << context;
    auto rm = RunSmolbox({"rm", box.name()});
    EXPECT_EQ(rm.exit_code, 0) << context << ": " << rm.err;
    ExpectNoTrace(box.name(), keeper, children, run_id);
  }
}

}  // namespace
}  // namespace smolbox::testing
