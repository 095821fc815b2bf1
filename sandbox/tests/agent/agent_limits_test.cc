// The limits the agent enforces itself: wall timeout, output cap, CPU, and the rule that
// nothing outlives the exec.
#include <gtest/gtest.h>

#include <charconv>

#include "agent_harness.h"
#include "test_support.h"

namespace smolbox::testing {
namespace {

pid_t FirstNumber(const std::string& text) {
  pid_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

class AgentLimits : public ::testing::Test {
 protected:
  ExecResult Sh(const std::string& script, int64_t timeout_ms = 10'000) {
    ExecRequest request = Request({"/bin/sh", "-c", script});
    request.timeout_ms = timeout_ms;
    return agent_.Run(request);
  }

  AgentProcess agent_;
};

TEST_F(AgentLimits, kills_a_busy_loop_at_the_timeout_and_leaves_no_process) {
  ExecResult r = Sh("echo $$; while :; do :; done", 500);
  EXPECT_EQ(r.report.status, Status::kTimeout);
  EXPECT_EQ(r.report.signal, SIGKILL);
  EXPECT_GE(r.report.wall_ms, 500);
  EXPECT_LT(r.report.wall_ms, 3000);
  EXPECT_GT(r.report.cpu_ms, 0);
  pid_t pgid = FirstNumber(r.out);
  ASSERT_GT(pgid, 1);
  EXPECT_FALSE(GroupAlive(pgid));
}

TEST_F(AgentLimits, kills_a_workload_that_ignores_sigterm) {
  ExecResult r = Sh("trap '' TERM INT HUP; echo $$; while :; do :; done", 500);
  EXPECT_EQ(r.report.status, Status::kTimeout);
  EXPECT_FALSE(GroupAlive(FirstNumber(r.out)));
}

TEST_F(AgentLimits, kills_every_child_at_the_timeout_not_only_the_main_process) {
  ExecResult r = Sh("sleep 100 & echo $!; wait", 300);
  EXPECT_EQ(r.report.status, Status::kTimeout);
  pid_t sleeper = FirstNumber(r.out);
  ASSERT_GT(sleeper, 1);
  EXPECT_FALSE(ProcessAlive(sleeper));
}

TEST_F(AgentLimits, ends_a_background_daemon_with_its_main_process) {
  ExecResult r = Sh("sleep 100 & echo $!");
  EXPECT_EQ(r.report.status, Status::kExited);
  EXPECT_LT(r.report.wall_ms, 2000);
  pid_t daemon = FirstNumber(r.out);
  ASSERT_GT(daemon, 1);
  EXPECT_FALSE(ProcessAlive(daemon));
}

TEST_F(AgentLimits, ends_a_daemon_that_let_go_of_its_pipes) {
  ExecResult r = Sh("sleep 100 </dev/null >/dev/null 2>&1 & echo $!");
  EXPECT_EQ(r.report.status, Status::kExited);
  pid_t daemon = FirstNumber(r.out);
  ASSERT_GT(daemon, 1);
  EXPECT_FALSE(ProcessAlive(daemon));
}

TEST_F(AgentLimits, forwards_exactly_the_cap_then_stops_the_flood) {
  ExecRequest request = Request({"/bin/sh", "-c", "yes"});
  request.output_bytes = 100'000;
  ExecResult r = agent_.Run(request);
  EXPECT_EQ(r.report.status, Status::kOutputLimit);
  EXPECT_TRUE(r.report.stdout_truncated);
  EXPECT_FALSE(r.report.stderr_truncated);
  EXPECT_EQ(r.out.size(), 100'000u);
}

TEST_F(AgentLimits, caps_stderr_like_stdout) {
  ExecRequest request = Request({"/bin/sh", "-c", "yes >&2"});
  request.output_bytes = 5'000;
  ExecResult r = agent_.Run(request);
  EXPECT_EQ(r.report.status, Status::kOutputLimit);
  EXPECT_TRUE(r.report.stderr_truncated);
  EXPECT_EQ(r.err.size(), 5'000u);
}

TEST_F(AgentLimits, does_not_truncate_output_of_exactly_the_cap) {
  ExecRequest request = Request({"/usr/bin/head", "-c", "70000", "/dev/zero"});
  request.output_bytes = 70'000;
  ExecResult r = agent_.Run(request);
  EXPECT_EQ(r.report.status, Status::kExited);
  EXPECT_FALSE(r.report.stdout_truncated);
  EXPECT_EQ(r.out.size(), 70'000u);
}

TEST_F(AgentLimits, forwards_output_in_chunks_of_at_most_64_KiB) {
  ExecRequest request = Request({"/usr/bin/head", "-c", "1000000", "/dev/zero"});
  ExecResult r = agent_.Run(request);
  EXPECT_EQ(r.out.size(), 1'000'000u);
  EXPECT_LE(r.largest_chunk, 64u * 1024);
}

TEST_F(AgentLimits, reports_cpu_limit_for_a_workload_over_its_cpu_time) {
  ExecRequest request = Request({"/bin/sh", "-c", "while :; do :; done"});
  request.cpu_ms = 1000;
  ExecResult r = agent_.Run(request);
  EXPECT_EQ(r.report.status, Status::kCpuLimit);
  EXPECT_EQ(r.report.signal, SIGXCPU);
  // rusage is sampled per tick and split into user and system time: on a loaded machine it
  // reads up to a few ticks short of the limit that fired.
  EXPECT_GE(r.report.cpu_ms, 900);
  EXPECT_LT(r.report.wall_ms, 5000);
}

TEST_F(AgentLimits, reports_cpu_limit_when_sigxcpu_is_ignored_and_sigkill_follows) {
  ExecRequest request = Request({"/bin/sh", "-c", "trap '' XCPU; while :; do :; done"});
  request.cpu_ms = 1000;
  ExecResult r = agent_.Run(request);
  EXPECT_EQ(r.report.status, Status::kCpuLimit);
  EXPECT_EQ(r.report.signal, SIGKILL);
  EXPECT_GE(r.report.cpu_ms, 1800);  // SIGKILL comes at the hard limit, a second later
}

}  // namespace
}  // namespace smolbox::testing
