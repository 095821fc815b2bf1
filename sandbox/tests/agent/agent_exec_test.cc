// One exec: what the workload gets (argv, env, stdin, cwd, fds, user, limits) and what the
// host gets back (output, exit code, status).
#include <gtest/gtest.h>

#include "agent_harness.h"

namespace smolbox::testing {
namespace {

class AgentExec : public ::testing::Test {
 protected:
  ExecResult Run(const ExecRequest& request, const std::optional<std::string>& stdin_data = std::nullopt) {
    return agent_.Run(request, stdin_data);
  }
  ExecResult Sh(const std::string& script) { return Run(Request({"/bin/sh", "-c", script})); }

  AgentProcess agent_;
};

TEST_F(AgentExec, relays_stdout_and_stderr_separately) {
  ExecResult r = Sh("echo out; echo err >&2");
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_EQ(r.report.status, Status::kExited);
  EXPECT_EQ(r.report.exit_code, 0);
}

TEST_F(AgentExec, feeds_stdin_to_the_workload_and_closes_it) {
  EXPECT_EQ(Run(Request({"/bin/cat"}), "line one\nline two\n").out, "line one\nline two\n");
}

TEST_F(AgentExec, round_trips_a_stdin_larger_than_a_pipe_buffer) {
  ExecRequest request = Request({"/bin/cat"});
  request.output_bytes = 2 << 20;
  std::string input(1 << 20, 'x');
  ExecResult r = Run(request, input);
  EXPECT_EQ(r.out, input);
  EXPECT_EQ(r.report.status, Status::kExited);
}

// Each chunk is acknowledged once it is in the pipe, so a host that keeps to the window can
// stream any size; the agent holds at most the window.
TEST_F(AgentExec, streams_a_stdin_many_windows_long_in_order) {
  std::string input;
  for (int i = 0; input.size() < 8 * kStdinWindowBytes; ++i) input += std::to_string(i) + "\n";
  ExecRequest request = Request({"/bin/cat"});
  request.output_bytes = static_cast<int64_t>(input.size());
  ExecResult r = Run(request, input);
  EXPECT_EQ(r.report.status, Status::kExited);
  EXPECT_EQ(r.stdin_sent, input.size());
  EXPECT_LE(r.most_in_flight, kStdinWindowBytes);
  EXPECT_TRUE(r.out == input) << r.out.size() << " bytes came back of " << input.size();
}

TEST_F(AgentExec, a_workload_that_closes_stdin_early_stops_the_stream_and_ends_normally) {
  ExecResult r = Run(Request({"/bin/sh", "-c", "head -c 5; exec 0<&-; sleep 0.5; echo done"}),
                     std::string(16 * kStdinWindowBytes, 'y'));
  EXPECT_EQ(r.out, "yyyyydone\n");
  EXPECT_EQ(r.report.status, Status::kExited);
  EXPECT_TRUE(r.stdin_closed);
  EXPECT_LT(r.stdin_sent, 16 * kStdinWindowBytes);
}

TEST_F(AgentExec, a_workload_that_never_reads_stdin_ends_without_waiting_for_it) {
  ExecResult r = Run(Request({"/bin/echo", "ignored"}), std::string(16 * kStdinWindowBytes, 'z'));
  EXPECT_EQ(r.out, "ignored\n");
  EXPECT_EQ(r.report.status, Status::kExited);
  EXPECT_LT(r.stdin_sent, 16 * kStdinWindowBytes);
}

TEST_F(AgentExec, stdin_sent_past_the_window_ends_the_exec_as_a_broken_host) {
  ExecRequest request = Request({"/bin/sleep", "30"});
  request.stdin_stream = true;
  std::vector<channel::Message> flood{EncodeExec(request)};
  // The window, the pipe's own buffer (which sleep never empties), and more.
  for (size_t sent = 0; sent <= 3 * kStdinWindowBytes; sent += kStdinChunkBytes) {
    flood.push_back(EncodeStdin(std::string(kStdinChunkBytes, 'w')));
  }
  agent_.SendTogether(flood);
  ExecResult r = agent_.Collect();
  EXPECT_NE(r.report.status, Status::kExited);
  EXPECT_LT(r.report.wall_ms, 10'000);
}

TEST_F(AgentExec, gives_an_empty_stdin_when_there_is_none) {
  ExecResult r = Run(Request({"/bin/cat"}));
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.report.exit_code, 0);
}

TEST_F(AgentExec, reports_the_workloads_exit_code) {
  EXPECT_EQ(Sh("exit 3").report.exit_code, 3);
  EXPECT_EQ(Sh("exit 0").report.exit_code, 0);
}

TEST_F(AgentExec, reports_the_signal_that_ended_the_workload) {
  ExecResult r = Sh("kill -SEGV $$");
  EXPECT_EQ(r.report.status, Status::kSignaled);
  EXPECT_EQ(r.report.signal, SIGSEGV);
}

TEST_F(AgentExec, reports_127_and_says_so_for_a_command_not_found) {
  ExecResult r = Run(Request({"smolbox-no-such-command"}));
  EXPECT_EQ(r.report.status, Status::kExited);
  EXPECT_EQ(r.report.exit_code, 127);
  EXPECT_EQ(r.err, "smolbox: smolbox-no-such-command: command not found\n");
}

TEST_F(AgentExec, reports_126_for_a_file_it_cannot_execute) {
  ExecResult r = Run(Request({"/etc/passwd"}));
  EXPECT_EQ(r.report.exit_code, 126);
  EXPECT_EQ(r.err, "smolbox: /etc/passwd: Permission denied\n");
}

TEST_F(AgentExec, searches_the_path_of_the_request_not_its_own) {
  ExecRequest request = Request({"sh", "-c", "echo found"});
  request.env = {{"PATH", "/smolbox-nowhere"}};
  EXPECT_EQ(Run(request).report.exit_code, 127);
  request.env = {{"PATH", "/smolbox-nowhere:/bin"}};
  EXPECT_EQ(Run(request).out, "found\n");
}

TEST_F(AgentExec, passes_exactly_the_requested_environment) {
  ExecRequest request = Request({"/usr/bin/env"});
  request.env = {{"A", "1"}, {"B", "two words"}};
  EXPECT_EQ(Run(request).out, "A=1\nB=two words\n");
}

TEST_F(AgentExec, runs_in_the_requested_directory) {
  ExecRequest request = Request({"/bin/pwd"});
  request.cwd = "/usr";
  EXPECT_EQ(Run(request).out, "/usr\n");
}

TEST_F(AgentExec, reports_setup_error_naming_chdir_for_a_missing_directory) {
  ExecRequest request = Request({"/bin/true"});
  request.cwd = "/smolbox-no-such-dir";
  ExecResult r = Run(request);
  EXPECT_EQ(r.report.status, Status::kSetupError);
  EXPECT_EQ(r.report.error, "chdir /smolbox-no-such-dir: No such file or directory");
}

TEST_F(AgentExec, closes_every_fd_above_2) {
  // ls holds one fd of its own: the directory it lists, which takes the lowest, 3.
  EXPECT_EQ(Run(Request({"/bin/ls", "/proc/self/fd"})).out, "0\n1\n2\n3\n");
}

TEST_F(AgentExec, drops_every_capability_even_for_uid_0) {
  ExecResult r = Run(Request({"/bin/grep", "^Cap", "/proc/self/status"}));
  EXPECT_EQ(r.out,
            "CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\n"
            "CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\n"
            "CapAmb:\t0000000000000000\n");
}

TEST_F(AgentExec, sets_no_new_privs) {
  EXPECT_EQ(Run(Request({"/bin/grep", "^NoNewPrivs", "/proc/self/status"})).out,
            "NoNewPrivs:\t1\n");
}

TEST_F(AgentExec, runs_as_the_requested_user_with_no_supplementary_groups) {
  ExecRequest request = Request({"/bin/sh", "-c", "id -u; id -g; id -G"});
  request.uid = 65534;
  request.gid = 65534;
  EXPECT_EQ(Run(request).out, "65534\n65534\n65534\n");
}

TEST_F(AgentExec, applies_the_requested_rlimits) {
  ExecRequest request = Request({"/bin/sh", "-c", "ulimit -n; ulimit -t; ulimit -d; ulimit -c"});
  request.files = 64;
  request.cpu_ms = 1500;             // rounded up to whole seconds
  request.memory_bytes = 512 << 20;  // ulimit -d is in KiB
  EXPECT_EQ(Run(request).out, "64\n2\n524288\n0\n");
}

TEST_F(AgentExec, neither_blocks_nor_ignores_signals_for_the_workload) {
  ExecResult r = Run(Request({"/bin/grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"}));
  EXPECT_EQ(r.out, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
}

TEST_F(AgentExec, keeps_the_agents_memory_out_of_the_workloads_reach) {
  // The workload runs as the agent's uid; only non-dumpability keeps /proc/<agent> closed.
  ExecResult r = Sh("cat /proc/$PPID/environ >/dev/null");
  EXPECT_NE(r.report.exit_code, 0);
  EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << r.err;
}

TEST_F(AgentExec, reports_wall_time_and_cpu_time) {
  ExecResult r = Sh("i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done");
  EXPECT_EQ(r.report.status, Status::kExited);
  EXPECT_GT(r.report.wall_ms, 0);
  EXPECT_GT(r.report.cpu_ms, 0);
  EXPECT_GT(r.report.peak_memory_bytes, 0);
}

}  // namespace
}  // namespace smolbox::testing
