// `smolbox create --prewarm python`: execs forked from a started interpreter in the guest
// (agent/zygote.h), under TCG. A forked exec is told apart by gc.get_freeze_count(), which
// only the zygote's frozen heap makes non-zero.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "smolbox_runner.h"
#include "test_support.h"

namespace smolbox::testing {
namespace {

constexpr const char* kPayloadTarget = "/payload";
constexpr const char* kFreezeCount = "import gc; print(gc.get_freeze_count() > 0)";

class PrewarmPython : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    payloads_ = new TempDir("prewarm-test");
    payloads_->Write("args.py",
                     "import os, sys\n"
                     "print(sys.argv, os.getcwd(), os.environ.get('GREETING'), sys.path[0])\n"
                     "print(sys.stdin.read().upper(), end='')\n"
                     "sys.exit(3)\n");
    payloads_->Write("raises.py", "x = 1\n1 / 0\n");
    name_ = "prewarm-" + RandomToken().substr(7, 12);
    auto created =
        RunSmolbox({"create", name_, "--backend", "vm", "--accel", "tcg", "--prewarm", "python",
                    "--mem", "128M", "-v", payloads_->path() + ":" + kPayloadTarget + ":ro"});
    ASSERT_EQ(created.exit_code, 0) << created.out << created.err;
  }

  static void TearDownTestSuite() {
    RunSmolbox({"rm", "--force", name_});
    delete payloads_;
  }

  // One exec; the zygote is ready a few seconds after create, so the first ones may retry.
  static Invocation Exec(const std::vector<std::string>& command,
                         const std::vector<std::string>& options = {}) {
    std::vector<std::string> args = {"exec", "--json"};
    args.insert(args.end(), options.begin(), options.end());
    if (std::find(options.begin(), options.end(), "--timeout") == options.end()) {
      args.insert(args.end(), {"--timeout", "60s"});
    }
    args.push_back(name_);
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    return RunSmolbox(args);
  }

  // Waits, bounded, until an exec comes from the zygote.
  static bool AwaitZygote() {
    for (int attempt = 0; attempt < 30; ++attempt) {
      if (Exec({"python3", "-c", kFreezeCount}).result.value("stdout", "") == "True\n") return true;
    }
    return false;
  }

  static inline TempDir* payloads_ = nullptr;
  static inline std::string name_;
};

TEST_F(PrewarmPython,
       a_forked_script_gets_its_argv_stdin_cwd_env_and_exit_code_as_python3_would_give) {
  ASSERT_TRUE(AwaitZygote()) << "no exec came from the zygote";
  TempDir input("prewarm-stdin");
  std::string stdin_file = input.Write("in.txt", "piped text\n");
  auto run = Exec({"python3", "/payload/args.py", "one", "two words"},
                  {"-e", "GREETING=hi", "-w", "/tmp", "--stdin", stdin_file});
  EXPECT_EQ(run.result.value("status", ""), "exited") << run.out << run.err;
  EXPECT_EQ(run.exit_code, 3);
  EXPECT_EQ(run.result.value("stdout", ""),
            "['/payload/args.py', 'one', 'two words'] /tmp hi /payload\nPIPED TEXT\n");
  auto code = Exec({"python3", "-c", "import sys; print(sys.argv, sys.path[0] == '')", "x"});
  EXPECT_EQ(code.result.value("stdout", ""), "['-c', 'x'] True\n") << code.out << code.err;
  // -u and -B the fork applies itself: stdout and stderr then are what -u makes at start.
  auto unbuffered = Exec(
      {"/usr/bin/python3", "-u", "-B", "-c",
       std::string(kFreezeCount) +
           "; import sys; o = sys.stdout; "
           "print(o.write_through, type(o.buffer).__name__, o.name, sys.dont_write_bytecode)"});
  EXPECT_EQ(unbuffered.result.value("stdout", ""), "True\nTrue FileIO <stdout> True\n")
      << unbuffered.err;
  auto raises = Exec({"python3", "/payload/raises.py"});
  EXPECT_EQ(raises.exit_code, 1);
  EXPECT_NE(raises.result.value("stderr", "").find("ZeroDivisionError"), std::string::npos)
      << raises.out;
  auto missing = Exec({"python3", "/payload/absent.py"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.result.value("stderr", "").find("can't open file '/payload/absent.py'"),
            std::string::npos)
      << missing.out;
}

TEST_F(PrewarmPython, a_forked_exec_is_in_the_workload_cgroup_and_its_limits_and_kill_hold) {
  ASSERT_TRUE(AwaitZygote()) << "no exec came from the zygote";
  auto cgroup =
      Exec({"python3", "-c",
            std::string(kFreezeCount) + "; print(open('/proc/self/cgroup').read(), end='')"});
  EXPECT_EQ(cgroup.result.value("stdout", ""), "True\n0::/\n") << cgroup.out << cgroup.err;
  auto bomb = Exec(
      {"python3", "-c",
       "b = bytearray(256 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('BREACH')"});
  EXPECT_EQ(bomb.result.value("status", ""), "memory_limit") << bomb.out << bomb.err;
  auto spin = Exec({"python3", "-c", "while True: pass"}, {"--timeout", "2s"});
  EXPECT_EQ(spin.result.value("status", ""), "timeout") << spin.out << spin.err;
  // A process the exec leaves behind is killed with it, as after a plain exec.
  auto left = Exec(
      {"python3", "-c", "import subprocess; subprocess.Popen(['sleep', '300']); print('started')"});
  EXPECT_EQ(left.result.value("stdout", ""), "started\n") << left.out << left.err;
  auto count =
      Exec({"/bin/sh", "-c", "cat /proc/[0-9]*/comm 2>/dev/null | grep -c '^sleep$' || true"});
  EXPECT_EQ(count.result.value("stdout", ""), "0\n") << "a forked exec's process outlived it";
  EXPECT_TRUE(AwaitZygote()) << "the zygote did not survive its execs' kills";
}

TEST_F(PrewarmPython,
       an_exec_sees_nothing_an_earlier_one_left_in_memory_and_cannot_reach_the_zygotes) {
  ASSERT_TRUE(AwaitZygote()) << "no exec came from the zygote";
  auto first =
      Exec({"python3", "-c", "import json; json.LEFT = 42; import random; print(random.random())"});
  auto second =
      Exec({"python3", "-c",
            "import json; print(hasattr(json, 'LEFT')); import random; print(random.random())"});
  std::string first_out = first.result.value("stdout", ""),
              second_out = second.result.value("stdout", "");
  ASSERT_TRUE(second_out.starts_with("False\n")) << second.out << second.err;
  EXPECT_NE(second_out.substr(6), first_out) << "two execs drew the same random numbers";
  // The zygote runs as the same uid as the execs. Not dumpable, it is hidden from their /proc
  // (hidepid), and its memory, which every later exec inherits, is out of their reach.
  auto reach = Exec({"python3", "-c",
                     "import os\n"
                     "me = os.getpid()\n"
                     "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
                     "    cmd = open(f'/proc/{pid}/cmdline', 'rb').read()\n"
                     "    if int(pid) != me and cmd.startswith(b'python3\\0-c\\0'):\n"
                     "        try:\n"
                     "            open(f'/proc/{pid}/mem', 'r+b')\n"
                     "            print('OPENED', pid)\n"
                     "        except OSError as e:\n"
                     "            print('SEEN', pid, e)\n"
                     "print('SCANNED')\n"});
  EXPECT_EQ(reach.result.value("stdout", ""), "SCANNED\n") << reach.out << reach.err;
}

TEST_F(PrewarmPython, an_exec_python_would_start_differently_runs_as_a_plain_exec) {
  ASSERT_TRUE(AwaitZygote()) << "no exec came from the zygote";
  for (const auto& [command, env] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"python3", "-E", "-c", kFreezeCount}, ""},
           {{"python3", "-c", kFreezeCount}, "PYTHONDONTWRITEBYTECODE=1"},
           {{"python3", "-c", kFreezeCount}, "LANG=C"}}) {
    auto run = Exec(command,
                    env.empty() ? std::vector<std::string>{} : std::vector<std::string>{"-e", env});
    EXPECT_EQ(run.result.value("stdout", ""), "False\n")
        << fmt::format("{} {}", env, command[1]) << run.err;
  }
  // A request larger than the zygote's socket takes in one message (here 300 KiB of argv) runs
  // plain, and the zygote serves the next.
  std::string arg(100 << 10, 'x');
  auto large = Exec({"python3", "-c",
                     std::string(kFreezeCount) + "; import sys; print(sum(map(len, sys.argv[1:])))",
                     arg, arg, arg});
  EXPECT_EQ(large.result.value("stdout", ""), "False\n307200\n") << large.out << large.err;
  EXPECT_TRUE(AwaitZygote()) << "a large request stopped the zygote";
}

TEST(PrewarmBadInput, prewarm_names_what_it_takes_and_where_it_runs) {
  auto node = RunSmolbox({"create", "prewarm-bad", "--backend", "vm", "--prewarm", "ruby"});
  EXPECT_EQ(node.exit_code, 125);
  EXPECT_NE(node.err.find("prewarm: must be python"), std::string::npos) << node.err;
  auto ns = RunSmolbox({"create", "prewarm-bad", "--backend", "ns", "--prewarm", "python"});
  EXPECT_EQ(ns.exit_code, 125);
  EXPECT_NE(ns.err.find("prewarm: needs the vm backend"), std::string::npos) << ns.err;
  // From a spec file as from the flag; and a run, which has one exec, takes none.
  TempDir specs("prewarm-specs");
  auto ns_spec = RunSmolbox({"create", "prewarm-bad", "--spec",
                             specs.Write("ns.json", R"({"backend": "ns", "prewarm": "python"})")});
  EXPECT_EQ(ns_spec.exit_code, 125);
  EXPECT_NE(ns_spec.err.find("prewarm: needs the vm backend"), std::string::npos) << ns_spec.err;
  auto run = RunSmolbox(
      {"run", "--spec",
       specs.Write("run.json", R"({"backend": "vm", "prewarm": "python", "argv": ["true"]})")});
  EXPECT_EQ(run.exit_code, 125);
  EXPECT_NE(run.err.find("prewarm: is for a created sandbox's execs"), std::string::npos)
      << run.err;
}

}  // namespace
}  // namespace smolbox::testing
