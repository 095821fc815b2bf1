// The egress tests' fixture: one test internet (conformance/src/battery/test_internet.h) for
// all the tests of a suite, and smolbox run inside its client namespace, which has nothing but
// loopback, so that a gateway dialing from the wrong namespace reaches nothing.
//
//   class Egress : public TestInternetTest {};
//   TEST_F(Egress, the_allowed_name_is_reached) {
//     Invocation run = RunSmolboxInClient({"run", "--json", "--egress-netns",
//         internet().uplink_netns_path(), "--", "/usr/bin/curl", "http://api.allowed.test/"});
//     EXPECT_EQ(run.result["stdout"], "server=192.0.2.10 host=api.allowed.test")
//         << internet().ServerLog();
//   }
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "battery/test_internet.h"
#include "smolbox_runner.h"
#include "test_support.h"

namespace smolbox::testing {

using smolvm_check::kAllowedAddress;
using smolvm_check::kAllowedAddress6;
using smolvm_check::kDnsAddress;
using smolvm_check::kMetadataAddress;
using smolvm_check::kOtherAddress;
using smolvm_check::kPrivateAddress;
using smolvm_check::kUplinkAddress;
using smolvm_check::kUplinkAddress6;
using smolvm_check::TestInternet;

// Built before a suite's first test and removed after its last. Each test skips, with the
// reason, when it could not be built.
class TestInternetTest : public ::testing::Test {
 public:
  static void SetUpTestSuite();
  static void TearDownTestSuite();

 protected:
  void SetUp() override;
  static TestInternet& internet() { return *internet_; }
  // `smolbox ARGS` inside the client namespace, as testing::RunSmolbox runs it.
  static Invocation RunSmolboxInClient(const std::vector<std::string>& args,
                                       const std::vector<std::string>& env = {});

 private:
  inline static std::unique_ptr<TestInternet> internet_;
  inline static std::string unavailable_;
};

}  // namespace smolbox::testing
