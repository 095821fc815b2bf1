#include "smolbox/error.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <memory>
#include <string>

namespace smolbox {
namespace {

TEST(ErrorToString, joins_where_what_and_strerror) {
  EXPECT_EQ((Error{"mount /proc", "cannot mount", EPERM}).ToString(),
            "mount /proc: cannot mount (Operation not permitted)");
}

TEST(ErrorToString, puts_strerror_in_place_of_a_missing_reason) {
  EXPECT_EQ(Error::Sys("open /x", ENOENT).ToString(), "open /x: No such file or directory");
}

TEST(ErrorToString, prints_a_field_error_without_errno) {
  EXPECT_EQ(Error::Field("limits.pids", "must be an integer").ToString(),
            "limits.pids: must be an integer");
}

TEST(ErrorToString, omits_an_empty_where) {
  EXPECT_EQ((Error{"", "is empty", 0}).ToString(), "is empty");
  EXPECT_EQ((Error{"", "", EACCES}).ToString(), "Permission denied");
}

TEST(ErrorToString, prints_where_alone_when_nothing_else_is_known) {
  EXPECT_EQ((Error{"fork", "", 0}).ToString(), "fork");
}

TEST(ErrorToString, never_returns_an_empty_string) {
  EXPECT_EQ(Error{}.ToString(), "unknown error");
}

Expected<int> Half(int n) {
  if (n % 2 != 0) return std::unexpected(Error::Field("n", "is odd"));
  return n / 2;
}

// Halves twice through the helpers; steps counts how far it got.
Expected<std::string> Quarter(int n, int& steps) {
  SMOLBOX_ASSIGN_OR_RETURN(int half, Half(n));
  ++steps;
  SMOLBOX_TRY(Half(half));
  ++steps;
  return std::to_string(half / 2);
}

TEST(ErrorHelpers, pass_the_value_on_and_the_first_error_up_unchanged) {
  int steps = 0;
  EXPECT_EQ(Quarter(8, steps), "2");
  EXPECT_EQ(steps, 2);
  steps = 0;
  auto odd = Quarter(7, steps);
  ASSERT_FALSE(odd);
  EXPECT_EQ(odd.error().ToString(), "n: is odd");
  EXPECT_EQ(steps, 0);
  auto odd_half = Quarter(6, steps);
  ASSERT_FALSE(odd_half);
  EXPECT_EQ(steps, 1);
}

Expected<std::unique_ptr<int>> Boxed(int n) { return std::make_unique<int>(n); }

// A move-only value is moved out, and an lvalue Expected is checked without a copy.
Expected<int> Unbox(int n) {
  SMOLBOX_ASSIGN_OR_RETURN(auto box, Boxed(n));
  Expected<std::unique_ptr<int>> again = Boxed(*box + 1);
  SMOLBOX_TRY(again);
  return *box + **again;
}

TEST(ErrorHelpers, work_with_move_only_values) { EXPECT_EQ(Unbox(1), 3); }

}  // namespace
}  // namespace smolbox
