// Each limit holds, in Python and in Node, and breaks this test when its enforcement is removed.
#include <gtest/gtest.h>
#include <sys/statvfs.h>

#include "fork_bomb.h"
#include "smolbox_runner.h"
#include "test_support.h"

namespace smolbox::testing {
namespace {

constexpr const char* kPython = "/usr/bin/python3";
constexpr const char* kNode = "/usr/bin/node";

int64_t FreeBytes(const char* path) {
  struct statvfs st{};
  statvfs(path, &st);
  return static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
}

TEST(Timeout, python_while_true_ends_as_timeout_within_four_seconds_and_leaves_no_process) {
  std::string marker = RandomToken();
  auto run = RunJson({"--timeout", "1s"}, {kPython, "-c", "while True: pass", marker});
  EXPECT_EQ(run.result["status"], "timeout") << run.out << run.err;
  EXPECT_EQ(run.exit_code, 124);
  EXPECT_LT(run.seconds, 4.0);
  EXPECT_EQ(CountProcessesWith(marker), 0);
}

TEST(Timeout, node_for_loop_ends_as_timeout_within_four_seconds_and_leaves_no_process) {
  std::string marker = RandomToken();
  auto run = RunJson({"--timeout", "1s"}, {kNode, "-e", "for(;;){}", marker});
  EXPECT_EQ(run.result["status"], "timeout") << run.out << run.err;
  EXPECT_LT(run.seconds, 4.0);
  EXPECT_EQ(CountProcessesWith(marker), 0);
}

TEST(Timeout, a_loop_that_ignores_sigterm_still_ends) {
  auto run = RunJson({"--timeout", "1s"},
                     {kPython, "-c", "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: pass"});
  EXPECT_EQ(run.result["status"], "timeout") << run.out << run.err;
  EXPECT_LT(run.seconds, 4.0);
}

TEST(CpuTime, a_busy_python_loop_ends_as_cpu_limit) {
  auto run = RunJson({"--cpu-time", "1s", "--timeout", "20s"}, {kPython, "-c", "while True: pass"});
  EXPECT_EQ(run.result["status"], "cpu_limit") << run.out << run.err;
  EXPECT_LT(run.seconds, 10.0);
}

TEST(Cpus, half_a_cpu_gets_about_half_the_cpu_time_of_the_wall_time) {
  auto run = RunJson({"--cpus", "0.5", "--timeout", "10s"},
                     {kPython, "-c", "import time\nend = time.time() + 2\nwhile time.time() < end: pass"});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  int64_t cpu = run.result["usage"]["cpu_ms"];
  EXPECT_GT(cpu, 500);
  EXPECT_LT(cpu, 1400) << "a busy loop of 2 s wall used " << cpu << " ms of CPU under --cpus 0.5";
}

TEST(Files, opening_more_files_than_the_limit_fails_with_emfile) {
  auto run = RunJson({"--files", "32"},
                     {kPython, "-c", "import errno\nfs = []\ntry:\n  for i in range(100): fs.append(open('/dev/null'))\n  print('opened', len(fs))\n"
                                     "except OSError as e:\n  print('EMFILE' if e.errno == errno.EMFILE else e.errno, len(fs))"});
  std::string out = run.result["stdout"];
  EXPECT_EQ(out.rfind("EMFILE", 0), 0u) << run.out << run.err;
}

TEST(Memory, a_python_gigabyte_under_128m_ends_as_memory_limit_or_memory_error) {
  auto run = RunJson({"--mem", "128M", "--timeout", "30s"},
                     {kPython, "-c", "b = bytearray(1 << 30)\nprint('allocated', len(b))"});
  std::string status = run.result.value("status", "");
  bool memory_error = status == "exited" && run.result["stderr"].get<std::string>().find("MemoryError") != std::string::npos;
  EXPECT_TRUE(status == "memory_limit" || memory_error) << run.out << run.err;
  EXPECT_EQ(run.result["stdout"].get<std::string>().find("allocated"), std::string::npos);
}

TEST(Memory, a_node_buffer_growth_under_128m_ends_as_memory_limit) {
  const char* grow = "const a=[]; for(let i=0;i<64;i++){a.push(Buffer.alloc(16<<20,1));} console.log('allocated')";
  auto run = RunJson({"--mem", "128M", "--timeout", "30s"}, {kNode, "-e", grow});
  EXPECT_EQ(run.result["stdout"].get<std::string>().find("allocated"), std::string::npos) << run.out;
  EXPECT_NE(run.result["status"], "exited") << run.out << run.err;
}

TEST(Memory, large_but_allowed_memory_still_works) {
  auto run = RunJson({"--mem", "256M"}, {kPython, "-c", "b = bytearray(100 << 20)\nprint(len(b))"});
  EXPECT_EQ(run.result["status"], "exited") << run.out << run.err;
  EXPECT_EQ(run.result["stdout"], "104857600\n");
}

TEST(Pids, a_python_fork_bomb_under_32_pids_is_contained_and_the_host_count_recovers) {
  std::string marker = RandomToken();
  auto run = RunJson({"--pids", "32", "--timeout", "10s"}, {kPython, "-c", kPythonForkBomb, marker});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  std::string out = run.result["stdout"];
  int made = std::stoi(out.substr(out.find(' ') + 1));
  EXPECT_LT(made, 32) << out;
  EXPECT_NE(std::find(run.result["limits_hit"].begin(), run.result["limits_hit"].end(), "pids"),
            run.result["limits_hit"].end());
  EXPECT_EQ(CountProcessesWith(marker), 0);
}

TEST(Pids, a_node_spawn_loop_under_32_pids_is_contained) {
  const char* spawn = R"(const cp=require('child_process'); let made=0;
for(let i=0;i<300;i++){ try { const c=cp.spawn('/bin/sleep',['5']); if(!c.pid) break; made++; } catch(e) { break; } }
console.log('spawned', made); process.exit(0);)";
  std::string marker = RandomToken();
  auto run = RunJson({"--pids", "32", "--timeout", "10s"}, {kNode, "-e", spawn, marker});
  std::string out = run.result.value("stdout", "");
  ASSERT_NE(out.find("spawned"), std::string::npos) << run.out << run.err;
  EXPECT_LT(std::stoi(out.substr(out.find(' ') + 1)), 32) << out;
  EXPECT_EQ(CountProcessesWith(marker), 0);
}

// Writes at most 512 MiB and stops at the first error.
constexpr const char* kPythonDiskBomb = R"(
import errno
written = 0
try:
    with open('/tmp/bomb', 'wb') as f:
        while written < (512 << 20):
            f.write(b'x' * (1 << 20))
            f.flush()
            written += 1 << 20
    print('wrote', written)
except OSError as e:
    print('ENOSPC' if e.errno == errno.ENOSPC else 'other', e.errno, written)
)";

TEST(Storage, a_python_disk_bomb_under_32m_gets_enospc_and_nothing_large_lands_on_the_host) {
  int64_t before = FreeBytes("/var/tmp");
  auto run = RunJson({"--storage", "32M", "--mem", "256M"}, {kPython, "-c", kPythonDiskBomb});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  std::string out = run.result["stdout"];
  EXPECT_EQ(out.rfind("ENOSPC", 0), 0u) << run.out;
  EXPECT_LE(std::stoll(out.substr(out.rfind(' ') + 1)), 32LL << 20) << "wrote more than the quota: " << out;
  EXPECT_NE(std::find(run.result["limits_hit"].begin(), run.result["limits_hit"].end(), "storage"),
            run.result["limits_hit"].end());
  EXPECT_GT(FreeBytes("/var/tmp"), before - (16 << 20));
}

TEST(Storage, the_quota_holds_when_it_is_larger_than_the_memory_limit) {
  auto run = RunJson({"--storage", "256M", "--mem", "64M", "--timeout", "60s"}, {kPython, "-c", kPythonDiskBomb});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  std::string out = run.result["stdout"];
  EXPECT_EQ(out.rfind("ENOSPC", 0), 0u) << out;
  // More than the memory limit was written (the storage is on disk, not in RAM), but no more
  // than the quota.
  int64_t written = std::stoll(out.substr(out.rfind(' ') + 1));
  EXPECT_GT(written, 128LL << 20) << out;
  EXPECT_LE(written, 256LL << 20) << out;
}

TEST(Storage, a_node_disk_bomb_in_dev_shm_gets_enospc) {
  const char* bomb = R"(const fs=require('fs'); let n=0; const b=Buffer.alloc(1<<20,120);
try { const fd=fs.openSync('/dev/shm/bomb','w'); while(n < 512) { fs.writeSync(fd,b); n++; } console.log('wrote', n); }
catch(e) { console.log(e.code, n); })";
  auto run = RunJson({"--storage", "32M"}, {kNode, "-e", bomb});
  EXPECT_EQ(run.result["stdout"].get<std::string>().rfind("ENOSPC", 0), 0u) << run.out << run.err;
}

TEST(Output, a_stdout_flood_hits_output_limit_and_the_runtime_stays_small) {
  auto run = RunJson({"--output-limit", "1M", "--timeout", "30s"},
                     {kPython, "-c", "import sys\nfor i in range(400): sys.stdout.write('x' * (1 << 20))"});
  EXPECT_EQ(run.result["status"], "output_limit") << run.err;
  EXPECT_TRUE(run.result["stdout_truncated"].get<bool>());
  EXPECT_EQ(run.result["stdout"].get<std::string>().size(), 1u << 20);
  EXPECT_LT(run.max_rss_kib, 64 * 1024) << "the runtime's own RSS grew with the workload's output";
}

TEST(Output, a_node_stderr_flood_is_capped_per_stream) {
  auto run = RunJson({"--output-limit", "64K", "--timeout", "30s"},
                     {kNode, "-e", "const s='y'.repeat(1<<16); for(let i=0;i<2000;i++) process.stderr.write(s);"});
  EXPECT_EQ(run.result["status"], "output_limit") << run.out.substr(0, 500);
  EXPECT_EQ(run.result["stderr"].get<std::string>().size(), 64u << 10);
  EXPECT_TRUE(run.result["stderr_truncated"].get<bool>());
}

}  // namespace
}  // namespace smolbox::testing
