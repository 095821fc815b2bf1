// A build without -DSMOLBOX_MUTANTS holds no switch (core/mutant.h): neither the names that
// would turn protections off nor the environment variable that would carry them, and setting
// that variable changes nothing.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "smolbox_runner.h"
#include "test_support.h"

namespace smolbox::testing {
namespace {

std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(ReleaseBuild, holds_no_mutant_switch_in_smolbox_or_its_agent) {
  for (const std::string& binary : {SmolboxPath(), HelperPath("smolbox-agent")}) {
    std::string bytes = Contents(binary);
    ASSERT_GT(bytes.size(), 100000u) << binary;
    EXPECT_EQ(bytes.find("SMOLBOX_DISABLE"), std::string::npos) << binary;
    EXPECT_EQ(bytes.find("mutant build"), std::string::npos) << binary;
  }
  Invocation version = RunSmolbox({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out.find("mutant"), std::string::npos) << version.out;
}

TEST(ReleaseBuild, ignores_smolbox_disable) {
  // keyctl (250 on x86-64) is denied by the seccomp policy with EPERM; the variable is not
  // passed to the workload either.
  Invocation run = RunSmolbox({"run", "--json", "--", "/usr/bin/python3", "-c",
                               "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
                               "libc.syscall(250, 0, 0, 0, 0, 0); print(ctypes.get_errno(), os.environ.get('SMOLBOX_DISABLE'))"},
                              {"SMOLBOX_DISABLE=seccomp,env_scrub"});
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  EXPECT_EQ(run.result.value("stdout", ""), "1 None\n");
  EXPECT_EQ(run.err.find("mutant"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace smolbox::testing
