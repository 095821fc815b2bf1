#include "test_internet.h"

namespace smolbox::testing {

void TestInternetTest::SetUpTestSuite() {
  auto made = TestInternet::Create();
  if (made) {
    internet_ = std::move(*made);
  } else {
    unavailable_ = made.error().ToString();
  }
}

void TestInternetTest::TearDownTestSuite() {
  internet_.reset();
  unavailable_.clear();
}

void TestInternetTest::SetUp() {
  if (!internet_) GTEST_SKIP() << "no test internet: " << unavailable_;
}

Invocation TestInternetTest::RunSmolboxInClient(const std::vector<std::string>& args,
                                                const std::vector<std::string>& env) {
  // nsenter, not ip netns exec: it changes only the network namespace, where ip netns exec also
  // remounts /sys and so hides the cgroup hierarchies that smolbox's limits need. It execs
  // smolbox in place, so the exit code and peak RSS are smolbox's own.
  return RunSmolbox(args, env, 0,
                    {"/usr/bin/nsenter", "--net=" + internet().client_netns_path(), "--"});
}

}  // namespace smolbox::testing
