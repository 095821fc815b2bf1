// SIGKILL of `smolbox run` at a random point of its setup, run and copy-back, many times over.
// After each, no process of the run may live on; after the next run's sweep, no mount, loop
// device, cgroup or run dir may be left; and the rw volume must never hold a half-written
// file: the output is there whole, or not at all.
//
// SMOLBOX_CHAOS_TRIALS sets the number of trials (scripts/chaos runs 200); SMOLBOX_CHAOS_SEED
// replays one sequence of delays.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "smolbox_runner.h"
#include "test_support.h"

namespace smolbox::testing {
namespace {

constexpr int kDefaultTrials = 40;
constexpr size_t kOutputBytes = 16 << 20;  // copying it back takes long enough to be hit
// A run here takes about 200 ms from start to copy-back; the kills spread a little past it.
constexpr int kLatestKillMs = 250;
constexpr const char* kWriter =
    "import sys\nopen('/out/result.bin', 'wb').write(b'x' * (16 << 20))\nprint('written', sys.argv[1])";

int EnvInt(const char* name, int fallback) {
  const char* value = getenv(name);
  return value != nullptr && *value != '\0' ? std::atoi(value) : fallback;
}

struct HostState {
  size_t mounts, loops, cgroups, runs;
  // Nothing more than before: a young run dir of an earlier, killed process may be swept meanwhile.
  bool NoMoreThan(const HostState& o) const {
    return mounts <= o.mounts && loops <= o.loops && cgroups <= o.cgroups && runs <= o.runs;
  }
  std::string ToString() const {
    return fmt::format("{} mounts, {} loop devices, {} smolbox cgroups, {} run dirs", mounts, loops, cgroups, runs);
  }
};

HostState Now() {
  return {CountLines("/proc/self/mountinfo"), CountBoundLoopDevices(), CountSmolboxCgroups(),
          CountEntries("/run/smolbox/runs")};
}

// What the killed run left in its rw volume: "" when it is nothing or the whole output.
std::string HalfWritten(const std::string& dir) {
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string name = entry.path().filename();
    if (name != "result.bin") return "a stray entry " + name;
    std::string data = ReadFileOrEmpty(entry.path());
    if (data.size() != kOutputBytes || data.find_first_not_of('x') != std::string::npos) {
      return fmt::format("result.bin of {} bytes, not the whole {}", data.size(), kOutputBytes);
    }
  }
  return "";
}

TEST(Chaos, sigkill_of_smolbox_run_at_random_points_leaves_nothing_and_no_half_written_output) {
  int trials = EnvInt("SMOLBOX_CHAOS_TRIALS", kDefaultTrials);
  unsigned seed = static_cast<unsigned>(EnvInt("SMOLBOX_CHAOS_SEED", static_cast<int>(std::random_device{}() >> 1)));
  RecordProperty("seed", static_cast<int>(seed));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> delay_ms(0, kLatestKillMs);
  // The state a sweep must bring the host back to; the first run also sweeps older litter.
  ASSERT_EQ(RunJson({}, {"/bin/true"}).result.value("status", ""), "exited");
  HostState before = Now();
  int whole = 0;
  for (int trial = 0; trial < trials; ++trial) {
    TempDir out("chaos-out");
    std::string marker = RandomToken();
    int delay = delay_ms(rng);
    pid_t pid = fork();
    if (pid == 0) {
      int null_fd = open("/dev/null", O_RDWR);
      dup2(null_fd, 1);
      dup2(null_fd, 2);
      std::string volume = out.path() + ":/out:rw";
      execl(SmolboxPath().c_str(), "smolbox", "run", "--backend", "ns", "-v", volume.c_str(), "--", "/usr/bin/python3",
            "-c", kWriter, marker.c_str(), nullptr);
      _exit(99);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    std::string context = fmt::format("trial {} (seed {}, killed after {} ms)", trial, seed, delay);
    EXPECT_TRUE(WaitUntil([&] { return CountProcessesWith(marker) == 0; }, std::chrono::seconds(10)))
        << context << ": the sandbox outlived its runtime";
    std::string half = HalfWritten(out.path());
    EXPECT_EQ(half, "") << context << ": the rw volume holds " << half;
    whole += std::filesystem::exists(out.path() + "/result.bin") ? 1 : 0;
  }
  ASSERT_EQ(RunJson({}, {"/bin/true"}).result.value("status", ""), "exited");
  EXPECT_TRUE(WaitUntil([&] { return Now().NoMoreThan(before); }, std::chrono::seconds(10)))
      << "before: " << before.ToString() << "; after the sweep: " << Now().ToString();
  fmt::print("{} trials (seed {}): the output came back whole {} times, not at all the others\n", trials, seed, whole);
}

}  // namespace
}  // namespace smolbox::testing
