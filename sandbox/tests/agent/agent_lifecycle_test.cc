// The agent as a server: ready, serving, and going away with the host.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <charconv>
#include <csignal>

#include "agent_harness.h"
#include "test_support.h"

namespace smolbox::testing {
namespace {

using std::chrono::seconds;

pid_t ParsePid(const std::string& text) {
  pid_t pid = 0;
  std::from_chars(text.data(), text.data() + text.size(), pid);
  return pid;
}

// Starts an exec that prints its pid (its process group's id) and sleeps; returns that pid,
// or 0 when it never said it.
pid_t StartSleeper(AgentProcess& agent) {
  agent.Send(EncodeExec(Request({"/bin/sh", "-c", "echo $$; exec sleep 100"})));
  auto pid_line = agent.Read();
  return pid_line ? ParsePid(pid_line->tail) : 0;
}

TEST(AgentLifecycle, sends_ready_when_it_starts) {
  AgentProcess agent;
  EXPECT_TRUE(agent.ready());
}

TEST(AgentLifecycle, exits_zero_when_the_host_closes_the_channel) {
  AgentProcess agent;
  agent.CloseChannel();
  auto status = agent.WaitExit(seconds(5));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status));
  EXPECT_EQ(WEXITSTATUS(*status), 0);
}

TEST(AgentLifecycle, serves_two_execs_in_a_row) {
  AgentProcess agent;
  ExecResult first = agent.Run(Request({"echo", "one"}));
  ExecResult second = agent.Run(Request({"echo", "two"}));
  EXPECT_EQ(first.out, "one\n");
  EXPECT_EQ(second.out, "two\n");
  EXPECT_EQ(second.report.status, Status::kExited);
}

TEST(AgentLifecycle, replies_error_to_an_unknown_message_and_keeps_serving) {
  AgentProcess agent;
  agent.Send({{{"type", "bogus"}}, ""});
  auto reply = agent.Read();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->Type(), "error");
  EXPECT_NE(reply->header.value("error", "").find("bogus"), std::string::npos);
  EXPECT_EQ(agent.Run(Request({"echo", "still here"})).out, "still here\n");
}

TEST(AgentLifecycle, answers_a_malformed_exec_with_internal_error) {
  AgentProcess agent;
  agent.Send({{{"type", "exec"}, {"argv", {"echo"}}}, ""});  // no env, cwd, limits
  ExecResult result = agent.Collect();
  EXPECT_EQ(result.report.status, Status::kInternalError);
  EXPECT_FALSE(result.report.error.empty());
}

TEST(AgentLifecycle, kills_the_workload_when_the_host_goes_away_mid_exec) {
  AgentProcess agent;
  pid_t pgid = StartSleeper(agent);
  ASSERT_GT(pgid, 1) << "the sleeper did not say its pid";
  EXPECT_TRUE(GroupAlive(pgid));
  agent.CloseChannel();
  auto status = agent.WaitExit(seconds(5));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status));
  EXPECT_FALSE(GroupAlive(pgid));
}

TEST(AgentLifecycle, a_cancel_ends_the_running_exec_and_a_late_one_is_ignored) {
  AgentProcess agent;
  pid_t pgid = StartSleeper(agent);
  ASSERT_GT(pgid, 1) << "the sleeper did not say its pid";
  agent.Send(EncodeCancel());
  ExecResult cancelled = agent.Collect();
  ASSERT_TRUE(cancelled.complete);
  EXPECT_EQ(cancelled.report.status, Status::kSignaled);
  EXPECT_EQ(cancelled.report.signal, SIGKILL);
  EXPECT_NE(cancelled.report.error.find("cancelled"), std::string::npos) << cancelled.report.error;
  EXPECT_LT(cancelled.report.wall_ms, 5000) << "ended by its timeout, not by the cancel";
  EXPECT_FALSE(GroupAlive(pgid));
  // A cancel that crossed its exec's exit arrives between execs: no reply, nothing broken.
  agent.Send(EncodeCancel());
  ExecResult next = agent.Run(Request({"echo", "still here"}));
  EXPECT_EQ(next.out, "still here\n");
  EXPECT_EQ(next.report.status, Status::kExited);
}

TEST(AgentLifecycle, a_cancel_read_together_with_its_exec_ends_it) {
  AgentProcess agent;
  agent.SendTogether({EncodeExec(Request({"/bin/sleep", "100"})), EncodeCancel()});
  ExecResult cancelled = agent.Collect();
  ASSERT_TRUE(cancelled.complete);
  EXPECT_NE(cancelled.report.error.find("cancelled"), std::string::npos) << cancelled.report.error;
  EXPECT_LT(cancelled.report.wall_ms, 5000) << "ended by its timeout, not by the cancel";
}

TEST(AgentLifecycle, refuses_to_start_without_a_channel) {
  int status = RunProgram({kAgentPath}).wait_status;
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
}

}  // namespace
}  // namespace smolbox::testing
