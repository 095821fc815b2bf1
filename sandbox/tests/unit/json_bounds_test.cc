#include "json_bounds.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "test_support.h"

namespace smolbox {
namespace {

using nlohmann::json;
using smolbox::testing::ErrorOf;

std::string Nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

const JsonBounds kSmall{.max_bytes = 1 << 20};

TEST(ParseBoundedJson, accepts_a_document_exactly_at_the_depth_limit) {
  auto doc = ParseBoundedJson(Nested(kMaxJsonDepth), kSmall, "test document");
  ASSERT_TRUE(doc) << doc.error().ToString();
  EXPECT_TRUE(doc->is_array());
}

TEST(ParseBoundedJson, refuses_one_level_deeper_naming_the_document_and_the_limit) {
  EXPECT_EQ(ErrorOf(ParseBoundedJson(Nested(kMaxJsonDepth + 1), kSmall, "test document")),
            "test document: nesting deeper than 32 levels");
  EXPECT_EQ(ErrorOf(ParseBoundedJson(R"({"a": {"b": [{}]}})", {.max_bytes = 100, .max_depth = 3},
                                     "spec file x.json")),
            "spec file x.json: nesting deeper than 3 levels");
}

TEST(ParseBoundedJson, refuses_200000_nested_brackets_in_milliseconds) {
  auto start = std::chrono::steady_clock::now();
  std::string error = ErrorOf(ParseBoundedJson(std::string(200000, '['), kSmall, "guest message"));
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(error, "guest message: nesting deeper than 32 levels");
  EXPECT_LT(took, std::chrono::milliseconds(100));
}

TEST(ParseBoundedJson, refuses_a_document_over_its_size_naming_the_limit) {
  std::string text = "\"" + std::string((1 << 20) - 1, 'a') + "\"";
  EXPECT_EQ(ErrorOf(ParseBoundedJson(text, kSmall, "guest message")),
            "guest message: 1048577 bytes is over the 1 MiB limit");
  EXPECT_EQ(ErrorOf(ParseBoundedJson("[1, 2]", {.max_bytes = 5}, "x")),
            "x: 6 bytes is over the 5 bytes limit");
}

TEST(ParseBoundedJson, accepts_a_document_exactly_at_its_size) {
  EXPECT_TRUE(ParseBoundedJson("[1, 2]", {.max_bytes = 6}, "x"));
}

TEST(ParseBoundedJson, refuses_more_values_than_its_limit) {
  const JsonBounds three{.max_bytes = 100, .max_values = 3};
  EXPECT_TRUE(ParseBoundedJson("[1, 2]", three, "x"));
  EXPECT_TRUE(ParseBoundedJson(R"({"a": 1, "b": 2})", three, "x"));
  EXPECT_EQ(ErrorOf(ParseBoundedJson("[1, 2, 3]", three, "x")), "x: more than 3 values");
  EXPECT_EQ(ErrorOf(ParseBoundedJson("[[], {}]", three, "x")), "x: more than 3 values");
}

TEST(ParseBoundedJson, refuses_a_flat_array_of_empty_objects_before_it_costs_memory) {
  std::string text = "[";
  for (size_t i = 0; i < kMaxJsonValues; ++i) text += "{},";
  text += "{}]";
  EXPECT_EQ(ErrorOf(ParseBoundedJson(text, kSmall, "x")), "x: more than 65536 values");
}

TEST(ParseBoundedJson, counts_no_brackets_or_commas_inside_strings) {
  std::string brackets = "\"" + std::string(1000, '[') + std::string(1000, ',') + "\"";
  EXPECT_TRUE(ParseBoundedJson(brackets, {.max_bytes = 4096, .max_values = 1}, "x"));
}

TEST(ParseBoundedJson, keeps_to_a_string_past_its_escaped_quotes_and_backslashes) {
  // Inside the string: \" and \\ are text; after the closing quote, the brackets count.
  std::string inside = R"(["\"[[[[", "\\", "\\\"[[["])";
  EXPECT_TRUE(ParseBoundedJson(inside, {.max_bytes = 100, .max_depth = 1}, "x"));
  std::string after = R"(["\\", [[]]])";
  EXPECT_EQ(ErrorOf(ParseBoundedJson(after, {.max_bytes = 100, .max_depth = 2}, "x")),
            "x: nesting deeper than 2 levels");
}

TEST(ParseBoundedJson, reports_malformed_json_with_its_byte_offset_and_reason) {
  std::string error = ErrorOf(ParseBoundedJson(R"({"argv": [})", kSmall, "spec"));
  EXPECT_TRUE(error.starts_with("spec: malformed JSON at byte 11: syntax error")) << error;
  EXPECT_EQ(error.find("json.exception"), std::string::npos) << error;
}

TEST(ParseBoundedJson, refuses_a_number_beyond_a_double_without_throwing) {
  EXPECT_EQ(ErrorOf(ParseBoundedJson("[1e999]", kSmall, "spec")),
            "spec: malformed JSON: number overflow parsing '1e999'");
}

TEST(ParseBoundedJson, leaves_the_where_to_the_caller_when_what_is_empty) {
  auto doc = ParseBoundedJson(Nested(40), kSmall, "");
  ASSERT_FALSE(doc);
  EXPECT_EQ(doc.error().where, "");
  EXPECT_EQ(doc.error().what, "nesting deeper than 32 levels");
}

TEST(StringOr, gives_the_fallback_for_a_missing_or_mistyped_field_or_a_non_object) {
  json object = {{"type", "exit"}, {"n", 1}};
  EXPECT_EQ(StringOr(object, "type", "?"), "exit");
  EXPECT_EQ(StringOr(object, "n", "?"), "?");
  EXPECT_EQ(StringOr(object, "absent", "?"), "?");
  EXPECT_EQ(StringOr(json::array({1}), "type", "?"), "?");
}

TEST(IntOr, gives_the_fallback_for_a_mistyped_or_out_of_range_field) {
  json object = {{"fd", 2},      {"big", 1LL << 40}, {"huge", 18446744073709551615ULL},
                 {"float", 1.5}, {"text", "1"},      {"low", -2}};
  EXPECT_EQ(IntOr(object, "fd", 0), 2);
  EXPECT_EQ(IntOr(object, "low", 0), -2);
  EXPECT_EQ(IntOr(object, "big", 0), 0);
  EXPECT_EQ(IntOr(object, "huge", 0), 0);
  EXPECT_EQ(IntOr(object, "float", 0), 0);
  EXPECT_EQ(IntOr(object, "text", 0), 0);
  EXPECT_EQ(IntOr(json("x"), "fd", 7), 7);
}

TEST(IntegerAt, reads_an_integer_in_range_of_its_type) {
  json object = {{"uid", 1000}, {"big", 18446744073709551615ULL}, {"low", -1}};
  EXPECT_EQ(IntegerAt<uint32_t>(object, "uid"), 1000u);
  EXPECT_EQ(IntegerAt<uint64_t>(object, "big"), 18446744073709551615ULL);
  EXPECT_EQ(IntegerAt<int64_t>(object, "low"), -1);
}

TEST(IntegerAt, throws_for_a_float_rather_than_casting_it) {
  // nlohmann reads an integer literal beyond 64 bits as a float: get<int64_t>() of it is
  // undefined behaviour (the exec fuzz target found it in an exit report's cpu_ms).
  auto object = json::parse(R"({"cpu_ms": 9999999999999999999999999999999999999999990, "f": 1.5})");
  EXPECT_THROW(IntegerAt<int64_t>(object, "cpu_ms"), json::type_error);
  EXPECT_THROW(IntegerAt<int>(object, "f"), json::type_error);
  EXPECT_THROW(IntegerAt<int>(object, "absent"), json::out_of_range);
}

TEST(IntegerAt, throws_for_a_value_out_of_its_types_range) {
  json object = {{"uid", -1}, {"exit_code", 1LL << 40}, {"big", 18446744073709551615ULL}};
  EXPECT_THROW(IntegerAt<uint32_t>(object, "uid"), json::out_of_range);
  EXPECT_THROW(IntegerAt<int>(object, "exit_code"), json::out_of_range);
  EXPECT_THROW(IntegerAt<int64_t>(object, "big"), json::out_of_range);
}

TEST(FormatLimitBytes, names_whole_mebibytes_and_kibibytes) {
  EXPECT_EQ(FormatLimitBytes(64 << 20), "64 MiB");
  EXPECT_EQ(FormatLimitBytes(64 << 10), "64 KiB");
  EXPECT_EQ(FormatLimitBytes(1000), "1000 bytes");
}

}  // namespace
}  // namespace smolbox
