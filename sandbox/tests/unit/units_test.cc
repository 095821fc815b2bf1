#include "smolbox/units.h"

#include <gtest/gtest.h>

#include <string>

#include "test_support.h"

namespace smolbox {
namespace {

using smolbox::testing::ErrorOf;

TEST(ParseDuration, accepts_milliseconds_seconds_minutes_and_hours) {
  EXPECT_EQ(ParseDuration("250ms"), 250);
  EXPECT_EQ(ParseDuration("2s"), 2000);
  EXPECT_EQ(ParseDuration("3m"), 180'000);
  EXPECT_EQ(ParseDuration("1h"), 3'600'000);
}

TEST(ParseDuration, reads_a_bare_number_as_milliseconds) {
  EXPECT_EQ(ParseDuration("1500"), 1500);
  EXPECT_EQ(ParseDuration("0"), 0);
}

TEST(ParseDuration, accepts_fractions_that_come_to_whole_milliseconds) {
  EXPECT_EQ(ParseDuration("1.5m"), 90'000);
  EXPECT_EQ(ParseDuration("0.25s"), 250);
  EXPECT_EQ(ParseDuration("2.000s"), 2000);
  EXPECT_EQ(ParseDuration("0.001s"), 1);
}

TEST(ParseDuration, rejects_fractions_of_a_millisecond) {
  EXPECT_EQ(ErrorOf(ParseDuration("1.5ms")), "\"1.5ms\" is not a whole number of milliseconds");
  EXPECT_FALSE(ParseDuration("0.0005s"));
}

TEST(ParseDuration, rejects_empty_text) { EXPECT_EQ(ErrorOf(ParseDuration("")), "is empty"); }

TEST(ParseDuration, rejects_negative_values) {
  EXPECT_EQ(ErrorOf(ParseDuration("-5s")), "must not be negative (got \"-5s\")");
}

TEST(ParseDuration, rejects_garbage_and_unknown_suffixes) {
  for (const char* text : {"abc", "s", "1x", "1S", "1 s", " 1s", "1s ", "+1s", "1..5s", ".5s",
                           "1.s", "1e3", "1sec", "0x10"}) {
    EXPECT_FALSE(ParseDuration(text)) << text;
  }
  EXPECT_EQ(ErrorOf(ParseDuration("1x")), "\"1x\" is not a duration (e.g. 250ms, 2s, 1.5m)");
}

TEST(ParseDuration, rejects_values_that_overflow) {
  EXPECT_EQ(ErrorOf(ParseDuration("99999999999999999999")),
            "\"99999999999999999999\" is too large");
  EXPECT_FALSE(ParseDuration("9223372036854775807s"));
  EXPECT_EQ(ParseDuration("9223372036854775807"), 9223372036854775807LL);
  // The fraction alone can push a value over the edge.
  EXPECT_EQ(ParseDuration("9223372036854775.807s"), 9223372036854775807LL);
  EXPECT_FALSE(ParseDuration("9223372036854775.808s"));
}

TEST(ParseDuration, rejects_more_than_nine_decimal_places) {
  EXPECT_EQ(ErrorOf(ParseDuration("1.0000000001s")),
            "\"1.0000000001s\" has too many decimal places");
  EXPECT_EQ(ParseDuration("1.0000000000s"), 1000);  // trailing zeros do not count
}

TEST(ParseDuration, escapes_unprintable_input_in_its_message) {
  EXPECT_EQ(ErrorOf(ParseDuration("1\n")), "\"1\\n\" is not a duration (e.g. 250ms, 2s, 1.5m)");
}

TEST(ParseBytes, accepts_k_m_g_t_suffixes_in_either_case) {
  EXPECT_EQ(ParseBytes("64K"), 64 << 10);
  EXPECT_EQ(ParseBytes("64k"), 64 << 10);
  EXPECT_EQ(ParseBytes("3M"), 3 << 20);
  EXPECT_EQ(ParseBytes("3m"), 3 << 20);
  EXPECT_EQ(ParseBytes("2G"), 2LL << 30);
  EXPECT_EQ(ParseBytes("2g"), 2LL << 30);
  EXPECT_EQ(ParseBytes("1T"), 1LL << 40);
}

TEST(ParseBytes, accepts_iec_suffixes) {
  EXPECT_EQ(ParseBytes("4KiB"), 4 << 10);
  EXPECT_EQ(ParseBytes("4MiB"), 4 << 20);
  EXPECT_EQ(ParseBytes("4GiB"), 4LL << 30);
  EXPECT_EQ(ParseBytes("4kib"), 4 << 10);
}

TEST(ParseBytes, reads_a_bare_number_as_mib) { EXPECT_EQ(ParseBytes("512"), 512LL << 20); }

TEST(ParseBytes, reads_a_b_suffix_as_bytes) {
  EXPECT_EQ(ParseBytes("100B"), 100);
  EXPECT_EQ(ParseBytes("100b"), 100);
}

TEST(ParseBytes, accepts_fractions_that_come_to_whole_bytes) {
  EXPECT_EQ(ParseBytes("1.5K"), 1536);
  EXPECT_EQ(ParseBytes("0.5M"), 512 << 10);
  EXPECT_EQ(ErrorOf(ParseBytes("0.5B")), "\"0.5B\" is not a whole number of bytes");
  EXPECT_FALSE(ParseBytes("0.0001K"));
}

TEST(ParseBytes, rejects_empty_negative_and_garbage) {
  EXPECT_EQ(ErrorOf(ParseBytes("")), "is empty");
  EXPECT_EQ(ErrorOf(ParseBytes("-1M")), "must not be negative (got \"-1M\")");
  EXPECT_EQ(ErrorOf(ParseBytes("lots")), "\"lots\" is not a size (e.g. 512K, 64M, 2G)");
  for (const char* text : {"M", "1X", "1KB", "1kk", "1 M", "1MiBs", "1e6"}) {
    EXPECT_FALSE(ParseBytes(text)) << text;
  }
}

TEST(ParseBytes, rejects_values_that_overflow) {
  EXPECT_EQ(ErrorOf(ParseBytes("8388608T")), "\"8388608T\" is too large");
  EXPECT_FALSE(ParseBytes("9223372036854775807K"));
  EXPECT_EQ(ParseBytes("8388607T"), 8388607LL << 40);
}

TEST(ParseSizeMiB, returns_whole_mib) {
  EXPECT_EQ(ParseSizeMiB("64M"), 64);
  EXPECT_EQ(ParseSizeMiB("2G"), 2048);
  EXPECT_EQ(ParseSizeMiB("512"), 512);
  EXPECT_EQ(ParseSizeMiB("1024K"), 1);
  EXPECT_EQ(ParseSizeMiB("1.5G"), 1536);
}

TEST(ParseSizeMiB, rejects_sizes_that_are_not_a_whole_mib) {
  EXPECT_EQ(ErrorOf(ParseSizeMiB("512K")), "\"512K\" is not a whole number of MiB");
  EXPECT_FALSE(ParseSizeMiB("1.5"));
  EXPECT_FALSE(ParseSizeMiB("100B"));
}

TEST(ParseSizeMiB, passes_parse_errors_through) {
  EXPECT_EQ(ErrorOf(ParseSizeMiB("-1M")), "must not be negative (got \"-1M\")");
}

TEST(UnitErrors, leave_the_field_to_the_caller) {
  auto result = ParseBytes("x");
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().where, "");
  EXPECT_EQ(result.error().errnum, 0);
}

}  // namespace
}  // namespace smolbox
