// The seccomp policy, probed one syscall at a time with syscall_probe. Each denial is also
// probed without the agent, where it must come out differently: otherwise the test could not
// fail, and a denial would prove nothing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent_harness.h"
#include "seccomp_policy.h"
#include "test_support.h"

namespace smolbox::testing {
namespace {

struct Denial {
  const char* probe;
  const char* errno_name;
};

std::string ProbeLine(const std::string& probe, const std::string& result) {
  return probe + ": " + result + "\n";
}

// The probe run with the policy loaded and nothing else dropped: as root, with every
// capability, the way the agent's child loads it just before execve.
std::string RunUnderPolicyOnly(const std::vector<std::string>& argv) {
  auto program = agent::CompileSeccompPolicy();
  if (!program) return "compile: " + program.error().ToString();
  ProgramOptions options;
  options.in_child = [&] {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(126);
    if (agent::LoadSeccompProgram(*program) != 0) _exit(126);
  };
  return RunProgram(argv, options).out;
}

// A syscall denied as if it did not exist, on a kernel where it does not.
bool DeniedAsMissing(const Denial& denial, const std::string& outside) {
  return std::string(denial.errno_name) == "ENOSYS" &&
         outside == ProbeLine(denial.probe, "errno=ENOSYS");
}

class SeccompDenial : public ::testing::TestWithParam<Denial> {};

TEST_P(SeccompDenial, is_refused_inside_the_agent_but_not_outside) {
  const Denial& denial = GetParam();
  std::string denied = ProbeLine(denial.probe, std::string("errno=") + denial.errno_name);
  std::string outside = RunProgram({kProbePath, denial.probe}).out;
  if (DeniedAsMissing(denial, outside)) {
    GTEST_SKIP() << denial.probe << " is newer than this kernel";
  }
  AgentProcess agent;
  ExecResult inside = agent.Run(Request({kProbePath, denial.probe}));
  EXPECT_EQ(inside.out, denied);
  EXPECT_EQ(inside.report.status, Status::kExited);
  EXPECT_NE(outside, denied) << "the probe cannot tell the policy from the host";
  EXPECT_NE(outside, "") << "the probe did not run outside the agent";
}

INSTANTIATE_TEST_SUITE_P(
    SeccompPolicy, SeccompDenial,
    ::testing::Values(Denial{"keyctl", "EPERM"}, Denial{"add_key", "EPERM"}, Denial{"bpf", "EPERM"},
                      Denial{"perf_event_open", "EPERM"}, Denial{"userfaultfd", "EPERM"},
                      Denial{"ptrace", "EPERM"}, Denial{"process_vm_readv", "EPERM"},
                      Denial{"unshare", "EPERM"}, Denial{"setns", "EPERM"},
                      Denial{"mount", "EPERM"}, Denial{"umount2", "EPERM"},
                      Denial{"pivot_root", "EPERM"}, Denial{"chroot", "EPERM"},
                      Denial{"fsopen", "EPERM"}, Denial{"open_tree", "EPERM"},
                      Denial{"open_tree_attr", "EPERM"}, Denial{"open_by_handle_at", "EPERM"},
                      Denial{"name_to_handle_at", "EPERM"}, Denial{"io_uring_setup", "ENOSYS"},
                      Denial{"clone3", "ENOSYS"}, Denial{"init_module", "EPERM"},
                      Denial{"finit_module", "EPERM"}, Denial{"delete_module", "EPERM"},
                      Denial{"swapon", "EPERM"}, Denial{"reboot", "EPERM"},
                      Denial{"syslog", "EPERM"}, Denial{"settimeofday", "EPERM"},
                      Denial{"clock_settime", "EPERM"}, Denial{"iopl", "EPERM"},
                      Denial{"ioperm", "EPERM"}, Denial{"socket_packet", "EPERM"},
                      Denial{"socket_netlink", "EPERM"}, Denial{"socket_vsock", "EPERM"},
                      Denial{"socketpair_netlink", "EPERM"}, Denial{"clone_newuser", "EPERM"},
                      Denial{"clone_newns", "EPERM"}, Denial{"clone_newnet", "EPERM"},
                      Denial{"tiocsti", "EPERM"}, Denial{"tiocsti_highbits", "EPERM"},
                      Denial{"modify_ldt", "EPERM"}, Denial{"sysctl", "EPERM"},
                      Denial{"sysfs", "EPERM"}, Denial{"ustat", "EPERM"}, Denial{"kcmp", "EPERM"},
                      Denial{"fanotify_init", "EPERM"}, Denial{"mbind", "EPERM"},
                      Denial{"set_mempolicy", "EPERM"}, Denial{"get_mempolicy", "EPERM"},
                      Denial{"set_mempolicy_home_node", "EPERM"}, Denial{"migrate_pages", "EPERM"},
                      Denial{"move_pages", "EPERM"}, Denial{"lsm_get_self_attr", "ENOSYS"},
                      Denial{"lsm_set_self_attr", "ENOSYS"}, Denial{"lsm_list_modules", "ENOSYS"},
                      Denial{"file_getattr", "ENOSYS"}, Denial{"file_setattr", "ENOSYS"},
                      Denial{"personality_read_implies_exec", "EPERM"},
                      Denial{"personality_addr_no_randomize", "EPERM"}),
    [](const ::testing::TestParamInfo<Denial>& param) { return std::string(param.param.probe); });

// The kernel refuses these to a process without the capability in any case, and the agent's
// workloads hold none, so only a process that keeps its capabilities shows the policy's own
// refusal.
class SeccompDenialOfACapability : public ::testing::TestWithParam<Denial> {};

TEST_P(SeccompDenialOfACapability, is_refused_even_to_root_holding_every_capability) {
  const Denial& denial = GetParam();
  if (geteuid() != 0) GTEST_SKIP() << "needs root, for the capability";
  std::string denied = ProbeLine(denial.probe, std::string("errno=") + denial.errno_name);
  EXPECT_EQ(RunUnderPolicyOnly({kProbePath, denial.probe}), denied);
  std::string outside = RunProgram({kProbePath, denial.probe}).out;
  EXPECT_NE(outside, denied) << "the probe cannot tell the policy from the host";
  EXPECT_NE(outside, "") << "the probe did not run outside the policy";
}

INSTANTIATE_TEST_SUITE_P(
    SeccompPolicy, SeccompDenialOfACapability,
    ::testing::Values(Denial{"sethostname", "EPERM"}, Denial{"setdomainname", "EPERM"},
                      Denial{"vhangup", "EPERM"}),
    [](const ::testing::TestParamInfo<Denial>& param) { return std::string(param.param.probe); });

TEST(SeccompPolicy, allows_unix_and_inet_sockets_and_plain_syscalls) {
  AgentProcess agent;
  ExecResult r = agent.Run(Request({kProbePath, "getpid", "socket_unix", "socket_inet"}));
  EXPECT_EQ(r.out, "getpid: ok\nsocket_unix: ok\nsocket_inet: ok\n");
}

TEST(SeccompPolicy, allows_the_personas_that_change_only_what_uname_reports) {
  AgentProcess agent;
  ExecResult r = agent.Run(Request({kProbePath, "personality_linux32"}));
  EXPECT_EQ(r.out, "personality_linux32: ok\n");
}

TEST(SeccompPolicy, allows_fork_and_pipes_through_plain_clone) {
  AgentProcess agent;
  EXPECT_EQ(agent.Run(Request({"/bin/sh", "-c", "echo piped | cat"})).out, "piped\n");
}

// A foreign ABI is not filtered syscall by syscall: the whole process dies.
void ExpectKilledInsideOnly(const char* probe) {
  ProgramRun outside = RunProgram({kProbePath, probe});
  if (!WIFEXITED(outside.wait_status)) GTEST_SKIP() << probe << " does not reach the kernel here at all";
  EXPECT_NE(outside.out, "");
  AgentProcess agent;
  ExecResult inside = agent.Run(Request({kProbePath, probe}));
  EXPECT_EQ(inside.report.status, Status::kViolation);
  EXPECT_EQ(inside.report.signal, SIGSYS);
  EXPECT_EQ(inside.out, "");
}

TEST(SeccompPolicy, kills_a_process_making_an_x32_syscall) { ExpectKilledInsideOnly("x32_getpid"); }

TEST(SeccompPolicy, kills_a_process_making_an_i386_syscall_through_int_0x80) {
  ExpectKilledInsideOnly("int80_getpid");
}

}  // namespace
}  // namespace smolbox::testing
