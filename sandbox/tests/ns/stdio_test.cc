// Stdio streams: output reaches the caller as the workload writes it, stdin of any size flows
// in with bounded memory, and a workload that ignores or closes its stdin ends as it would bare.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "smolbox_runner.h"
#include "test_support.h"

namespace smolbox::testing {
namespace {

using std::chrono::seconds;

constexpr int64_t kGiB = 1LL << 30;
constexpr long kMaxRssKib = 64 * 1024;

// A 1 GiB file that costs no disk: a hole reads as zeros.
std::string SparseGibibyte(const TempDir& dir) {
  std::string path = dir.path() + "/gibibyte";
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(ftruncate(fd, kGiB), 0);
  close(fd);
  return path;
}

// The workload prints "a", then waits for a line that the test sends only once "a" has come:
// collected output would arrive only after the run, and this would time out.
TEST(Stdio, output_streams_as_the_workload_writes_it_and_interactive_stdin_streams_in) {
  LiveSmolbox box({"run", "--backend", "ns", "-i", "--timeout", "60s", "--", "/bin/sh", "-c",
                   "echo a; read x; echo \"b $x\"; echo err >&2"});
  EXPECT_EQ(box.ReadStdoutUntil("a\n", seconds(30)), "a\n");
  ASSERT_TRUE(box.WriteStdin("go\n", seconds(30)));
  box.CloseStdin();
  EXPECT_EQ(box.ReadStdoutUntil("b go\n", seconds(30)), "a\nb go\n");
  EXPECT_EQ(box.Wait(seconds(30)), 0);
  EXPECT_NE(box.err().find("err\n"), std::string::npos) << box.err();
}

TEST(Stdio, a_gibibyte_stdin_file_streams_through_wc_and_smolbox_stays_under_64_mib) {
  TempDir dir;
  LiveSmolbox box({"run", "--backend", "ns", "--stdin", SparseGibibyte(dir), "--timeout", "120s", "--",
                   "/bin/sh", "-c", "wc -c; sleep 2"});
  EXPECT_EQ(box.ReadStdoutUntil("\n", seconds(120)), std::to_string(kGiB) + "\n");
  long peak = box.PeakRssKib();  // while it still runs: the workload sleeps after the count
  EXPECT_GT(peak, 0);
  EXPECT_LT(peak, kMaxRssKib);
  EXPECT_EQ(box.Wait(seconds(30)), 0) << box.err();
}

TEST(Stdio, a_gibibyte_piped_to_interactive_run_reaches_wc_exactly) {
  LiveSmolbox box({"run", "--backend", "ns", "-i", "--timeout", "120s", "--", "/bin/sh", "-c", "wc -c; sleep 2"});
  ASSERT_TRUE(box.WriteZeros(kGiB, seconds(120)));
  box.CloseStdin();
  EXPECT_EQ(box.ReadStdoutUntil("\n", seconds(60)), std::to_string(kGiB) + "\n");
  EXPECT_LT(box.PeakRssKib(), kMaxRssKib);
  EXPECT_EQ(box.Wait(seconds(30)), 0) << box.err();
}

TEST(Stdio, a_workload_that_never_reads_or_closes_its_stdin_early_ends_with_a_gibibyte_waiting) {
  TempDir dir;
  std::string big = SparseGibibyte(dir);
  auto ignored = RunJson({"--stdin", big, "--timeout", "60s"}, {"/bin/echo", "ignored"});
  EXPECT_EQ(ignored.result.value("status", ""), "exited") << ignored.out << ignored.err;
  EXPECT_EQ(ignored.result.value("stdout", ""), "ignored\n");
  EXPECT_LT(ignored.seconds, 30);
  auto closed = RunJson({"--stdin", big, "--timeout", "60s"},
                        {"/bin/sh", "-c", "head -c 3 | wc -c; exec 0<&-; sleep 1; echo closed"});
  EXPECT_EQ(closed.result.value("status", ""), "exited") << closed.out << closed.err;
  EXPECT_EQ(closed.result.value("stdout", ""), "3\nclosed\n");
  EXPECT_LT(closed.seconds, 30);
}

TEST(Stdio, streamed_output_is_capped_as_it_streams) {
  auto run = RunSmolbox({"run", "--backend", "ns", "--output-limit", "64K", "--timeout", "30s", "--",
                         "/bin/sh", "-c", "yes | head -c 1000000; echo done >&2"});
  EXPECT_EQ(run.out.size(), 64u << 10);
  EXPECT_EQ(run.out.substr(0, 4), "y\ny\n");
  EXPECT_NE(run.exit_code, 0) << run.err;
}

// As the writer of a shell pipeline whose reader exits: `smolbox run -- yes | head -1` ends
// then, not at its timeout.
TEST(Stdio, a_caller_that_stops_reading_output_ends_the_exec) {
  LiveSmolbox box({"run", "--backend", "ns", "--timeout", "120s", "--", "/usr/bin/yes"});
  EXPECT_EQ(box.ReadStdoutUntil("y\n", seconds(30)).substr(0, 2), "y\n");
  box.CloseStdout();
  EXPECT_TRUE(box.Wait(seconds(30)).has_value()) << "still running 30 s after its reader went";
}

TEST(Stdio, interactive_and_a_stdin_file_together_are_refused_naming_the_flag) {
  TempDir dir;
  auto run = RunSmolbox({"run", "-i", "--stdin", dir.Write("in", "x"), "--", "/bin/cat"});
  EXPECT_EQ(run.exit_code, 125);
  EXPECT_NE(run.err.find("--interactive: cannot be combined with --stdin"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace smolbox::testing
