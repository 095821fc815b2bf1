// The host under pressure: smolbox's state on a full filesystem, /run/smolbox removed in the
// middle of a run, too few descriptors (EMFILE) and a read-only cgroup hierarchy. Each must end
// in a clear error, or for the cgroups in a run whose limits still hold by rlimits with warnings
// that say so; leave no process, loop device, cgroup or run dir; and the next run must work.
//
// The pressure is made in a private mount namespace of the test's own (PrivateMountScript): a
// tmpfs over /run/smolbox or /run, and read-only remounts of the cgroup hierarchies. The host's
// own state and cgroup mounts are never touched.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "smolbox_runner.h"
#include "test_support.h"

namespace smolbox::testing {
namespace {

// What a run may leave on the host that outlives a mount namespace.
struct Leftovers {
  size_t loops, cgroups;
  static Leftovers Now() { return {CountBoundLoopDevices(), CountSmolboxCgroups()}; }
  std::string ToString() const { return fmt::format("{} loop devices, {} smolbox cgroups", loops, cgroups); }
};

void ExpectNoMoreThan(const Leftovers& before) {
  Leftovers after = Leftovers::Now();
  EXPECT_LE(after.loops, before.loops) << before.ToString() << " before, " << after.ToString() << " after";
  EXPECT_LE(after.cgroups, before.cgroups) << before.ToString() << " before, " << after.ToString() << " after";
}

TEST(HostPressure, a_full_state_filesystem_is_a_clear_error_leaves_nothing_and_the_next_run_works) {
  Leftovers before = Leftovers::Now();
  PrivateMountScript s;
  auto script = s.Run(R"sh(
    mkdir -p /run/smolbox && mount -t tmpfs -o size=2m,mode=0711 tmpfs /run/smolbox || exit 90
    head -c 4M /dev/zero > /run/smolbox/filler 2>/dev/null
    "$SMOLBOX" run --json -- /bin/echo ran > "$DIR/run.json" 2> "$DIR/run.err"; echo $? > "$DIR/run.rc"
    "$SMOLBOX" create --json "$NAME" > "$DIR/create.json" 2> "$DIR/create.err"; echo $? > "$DIR/create.rc"
    find /run/smolbox/runs /run/smolbox/sandboxes -mindepth 1 > "$DIR/left" 2>/dev/null
    rm /run/smolbox/filler
    "$SMOLBOX" run --json --storage 16M -- /bin/echo again > "$DIR/again.json" 2> "$DIR/again.err"
  )sh");
  ASSERT_EQ(script.exit_code, 0) << script.out << script.err;
  for (const char* step : {"run", "create"}) {
    EXPECT_EQ(s.Text(std::string(step) + ".rc"), "125\n") << step << ": " << s.Text(std::string(step) + ".err");
    auto result = s.Json(std::string(step) + ".json");
    EXPECT_EQ(result.value("status", ""), "setup_error") << step << ": " << result.dump();
    EXPECT_NE(result.value("error", "").find("No space left on device"), std::string::npos) << step << ": " << result.dump();
  }
  EXPECT_EQ(s.Text("left"), "") << "state left behind on the full filesystem";
  auto again = s.Json("again.json");
  EXPECT_EQ(again.value("stdout", ""), "again\n") << again.dump() << s.Text("again.err");
  // A storage template that no longer fits is made elsewhere, quietly.
  EXPECT_EQ(s.Text("again.err"), "");
  EXPECT_EQ(CountProcessesWith(s.name()), 0);
  ExpectNoMoreThan(before);
}

// /run/smolbox removed under a one-shot run and under a persistent sandbox: the run ends as it
// would have (its mounts live in its own mount namespace), the keeper ends its sandbox, and the
// next run makes the state dir anew.
TEST(HostPressure, run_smolbox_removed_mid_run_leaves_nothing_and_the_next_run_works) {
  Leftovers before = Leftovers::Now();
  PrivateMountScript s;
  auto script = s.Run(R"sh(
    mount -t tmpfs -o mode=0755 tmpfs /run || exit 90
    "$SMOLBOX" run --json --storage 16M -- /bin/sh -c 'echo started; sleep 2; echo data > /work/x; cat /work/x' \
      > "$DIR/run.json" 2> "$DIR/run.err" &
    i=0; while [ -z "$(ls -A /run/smolbox/runs 2>/dev/null)" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
    sleep 0.5
    rm -rf /run/smolbox
    wait $!; echo $? > "$DIR/run.rc"
    "$SMOLBOX" create "$NAME" > /dev/null 2> "$DIR/create.err"; echo $? > "$DIR/create.rc"
    "$SMOLBOX" exec "$NAME" -- /bin/echo served > "$DIR/exec.out" 2>&1
    rm -rf /run/smolbox
    "$SMOLBOX" run --json -- /bin/echo again > "$DIR/again.json" 2> "$DIR/again.err"
  )sh");
  ASSERT_EQ(script.exit_code, 0) << script.out << script.err;
  EXPECT_EQ(s.Text("run.rc"), "0\n") << s.Text("run.json") << s.Text("run.err");
  EXPECT_EQ(s.Json("run.json").value("stdout", ""), "started\ndata\n") << s.Text("run.json");
  EXPECT_EQ(s.Text("create.rc"), "0\n") << s.Text("create.err");
  EXPECT_EQ(s.Text("exec.out"), "served\n");
  EXPECT_EQ(s.Json("again.json").value("stdout", ""), "again\n") << s.Text("again.json") << s.Text("again.err");
  // The keeper whose directory went ends its sandbox: agent, mounts and cgroups with it.
  EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(s.name()) == 0; }, std::chrono::seconds(10)))
      << "the keeper of a sandbox whose state was removed lived on";
  EXPECT_TRUE(WaitUntil([&] { return Leftovers::Now().loops <= before.loops; }, std::chrono::seconds(5)));
  ExpectNoMoreThan(before);
}

// With too few descriptors smolbox fails at whichever step ran out, saying so, or runs: never a
// crash, a hang or a leak. At the lowest limits the dynamic loader itself fails, before smolbox
// runs.
TEST(HostPressure, too_few_descriptors_is_a_clear_error_or_a_run_and_leaves_nothing) {
  Leftovers before = Leftovers::Now();
  size_t runs_before = CountEntries("/run/smolbox/runs");
  std::set<std::string> errors;
  int ran = 0;
  for (int limit = 4; limit <= 24; ++limit) {
    std::string token = RandomToken();
    ProgramRun run = RunProgram({"/usr/bin/prlimit", fmt::format("--nofile={}", limit), SmolboxPath(), "run", "--json",
                                 "--storage", "16M", "--", "/bin/echo", token});
    auto result = nlohmann::json::parse(run.out, nullptr, false);
    std::string context = fmt::format("with {} descriptors: {} {}", limit, run.out, run.err);
    // The loader's failure, before smolbox runs: the lowest limits, with whatever descriptors the
    // test's own parent left open.
    if (run.exit_code == 127 && run.err.find("error while loading shared libraries") != std::string::npos) continue;
    ASSERT_TRUE(run.exit_code == 0 || run.exit_code == 125) << context;
    if (run.exit_code == 0) {
      EXPECT_EQ(result.value("stdout", ""), token + "\n") << context;
      ++ran;
    } else {
      EXPECT_EQ(result.value("status", ""), "setup_error") << context;
      EXPECT_FALSE(result.value("error", "").empty()) << context;
      errors.insert(result.value("error", ""));
    }
    EXPECT_EQ(CountProcessesWith(token), 0) << context;
  }
  bool named = false;
  for (const auto& error : errors) named |= error.find("Too many open files") != std::string::npos;
  EXPECT_TRUE(named) << "no limit made smolbox run out of descriptors, or none said so";
  EXPECT_GT(ran, 0) << "no limit up to 24 let a run through";
  EXPECT_LE(CountEntries("/run/smolbox/runs"), runs_before);
  ExpectNoMoreThan(before);
}

// Cgroups that cannot be made (a read-only hierarchy, as in some containers) weaken the limits
// to rlimits: the run says so in its warnings, and a memory bomb under --mem still fails.
TEST(HostPressure, a_read_only_cgroup_hierarchy_falls_back_to_rlimits_with_warnings_and_leaves_nothing) {
  Leftovers before = Leftovers::Now();
  PrivateMountScript s;
  auto script = s.Run(R"sh(
    for m in $(/usr/bin/findmnt -rn -t cgroup,cgroup2 -o TARGET); do mount -o remount,bind,ro "$m" || exit 90; done
    "$SMOLBOX" run --json --mem 64M -- /usr/bin/python3 -c \
      'b = bytearray(512 << 20); print("allocated", len(b))' > "$DIR/bomb.json" 2> "$DIR/bomb.err"
    "$SMOLBOX" run --json -- /bin/echo "$NAME" > "$DIR/hello.json" 2> "$DIR/hello.err"
  )sh");
  ASSERT_EQ(script.exit_code, 0) << script.out << script.err;
  auto bomb = s.Json("bomb.json");
  EXPECT_EQ(bomb.value("stdout", ""), "") << "512 MiB under --mem 64M: " << bomb.dump();
  EXPECT_NE(bomb.value("stderr", "").find("MemoryError"), std::string::npos) << bomb.dump();
  bool warned = false;
  for (const auto& warning : bomb.value("warnings", nlohmann::json::array())) {
    warned |= warning.get<std::string>().find("Read-only file system") != std::string::npos;
  }
  EXPECT_TRUE(warned) << bomb.dump();
  EXPECT_EQ(s.Json("hello.json").value("stdout", ""), s.name() + "\n") << s.Text("hello.json") << s.Text("hello.err");
  ExpectNoMoreThan(before);
  // Outside the namespace the hierarchy is writable again, and the next run has its cgroups.
  auto next = RunJson({"--mem", "64M"}, {"/bin/echo", "next"});
  EXPECT_EQ(next.result.value("stdout", ""), "next\n");
  EXPECT_EQ(next.result.value("warnings", nlohmann::json::array()).dump().find("Read-only"), std::string::npos)
      << next.out;
}

}  // namespace
}  // namespace smolbox::testing
