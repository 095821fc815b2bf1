// The oracles judge a case from its evidence alone: these feed them evidence by hand.
#include "battery/oracles.h"

#include <gtest/gtest.h>

#include "battery/catalog.h"

namespace smolvm_check {
namespace {

Case TimedCase() {
  Case c;
  c.id = "cpu.while_true.python";
  c.category = "cpu";
  c.expect.status = {"timeout"};
  c.expect.max_wall_ms = 6000;
  return c;
}

Evidence TimedOut(int64_t wall_ms) {
  Evidence e;
  e.status = "timeout";
  e.wall_ms = wall_ms;
  return e;
}

TEST(Oracles, a_run_within_its_wall_bound_passes) {
  EXPECT_EQ(Judge(TimedCase(), TimedOut(6000)).verdict, Verdict::kPass);
}

TEST(Oracles, a_run_over_its_wall_bound_fails_and_says_where_the_sandbox_says_the_time_went) {
  Evidence e = TimedOut(14007);
  Judgement bare = Judge(TimedCase(), e);
  EXPECT_EQ(bare.verdict, Verdict::kFail);
  EXPECT_EQ(bare.reason, "ran 14007 ms, over the bound of 6000 ms");
  e.sandbox_timings = "boot 3992 ms, setup 4077 ms, run 9800 ms, teardown 30 ms";
  Judgement told = Judge(TimedCase(), e);
  EXPECT_EQ(told.verdict, Verdict::kFail);
  EXPECT_EQ(told.reason,
            "ran 14007 ms, over the bound of 6000 ms (the sandbox's timings: boot 3992 ms, setup 4077 ms, "
            "run 9800 ms, teardown 30 ms)");
}

TEST(Oracles, a_status_not_allowed_fails_before_the_time_is_looked_at) {
  Evidence e = TimedOut(14007);
  e.status = "exited";
  EXPECT_EQ(Judge(TimedCase(), e).reason, "status exited, expected timeout");
}

}  // namespace
}  // namespace smolvm_check
