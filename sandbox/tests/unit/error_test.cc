#include "smolbox/error.h"

#include <gtest/gtest.h>

#include <cerrno>

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

}  // namespace
}  // namespace smolbox
