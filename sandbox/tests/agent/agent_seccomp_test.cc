// The seccomp policy, probed one syscall at a time with syscall_probe. Each denial is also
// probed without the agent, where it must come out differently: otherwise the test could not
// fail, and a denial would prove nothing.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include "agent_harness.h"

namespace smolbox::testing {
namespace {

struct Denial {
  const char* probe;
  const char* errno_name;
};

std::string ProbeLine(const std::string& probe, const std::string& result) {
  return probe + ": " + result + "\n";
}

class SeccompDenial : public ::testing::TestWithParam<Denial> {};

TEST_P(SeccompDenial, is_refused_inside_the_agent_but_not_outside) {
  const Denial& denial = GetParam();
  std::string denied = ProbeLine(denial.probe, std::string("errno=") + denial.errno_name);
  AgentProcess agent;
  ExecResult inside = agent.Run(Request({kProbePath, denial.probe}));
  EXPECT_EQ(inside.out, denied);
  EXPECT_EQ(inside.report.status, Status::kExited);
  std::string outside = RunDirect({kProbePath, denial.probe});
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
                      Denial{"tiocsti", "EPERM"}, Denial{"tiocsti_highbits", "EPERM"}),
    [](const ::testing::TestParamInfo<Denial>& param) { return std::string(param.param.probe); });

TEST(SeccompPolicy, allows_unix_and_inet_sockets_and_plain_syscalls) {
  AgentProcess agent;
  ExecResult r = agent.Run(Request({kProbePath, "getpid", "socket_unix", "socket_inet"}));
  EXPECT_EQ(r.out, "getpid: ok\nsocket_unix: ok\nsocket_inet: ok\n");
}

TEST(SeccompPolicy, allows_fork_and_pipes_through_plain_clone) {
  AgentProcess agent;
  EXPECT_EQ(agent.Run(Request({"/bin/sh", "-c", "echo piped | cat"})).out, "piped\n");
}

// A foreign ABI is not filtered syscall by syscall: the whole process dies.
void ExpectKilledInsideOnly(const char* probe) {
  int status = 0;
  std::string outside = RunDirect({kProbePath, probe}, &status);
  if (!WIFEXITED(status)) GTEST_SKIP() << probe << " does not reach the kernel here at all";
  EXPECT_NE(outside, "");
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
