#include "smolbox/result.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "core/exec_protocol.h"

namespace smolbox {
namespace {

using nlohmann::json;

const Status kAllStatuses[] = {
    Status::kExited,    Status::kSignaled,    Status::kTimeout,
    Status::kCpuLimit,  Status::kMemoryLimit, Status::kOutputLimit,
    Status::kViolation, Status::kSetupError,  Status::kInternalError,
};

RunResult Exited(int code) {
  RunResult r;
  r.status = Status::kExited;
  r.exit_code = code;
  return r;
}

RunResult Killed(Status status, int signal) {
  RunResult r;
  r.status = status;
  r.signal = signal;
  return r;
}

std::set<std::string> Keys(const json& j) {
  std::set<std::string> keys;
  for (const auto& item : j.items()) keys.insert(item.key());
  return keys;
}

TEST(StatusNames, match_the_design) {
  EXPECT_EQ(ToString(Status::kExited), "exited");
  EXPECT_EQ(ToString(Status::kSignaled), "signaled");
  EXPECT_EQ(ToString(Status::kTimeout), "timeout");
  EXPECT_EQ(ToString(Status::kCpuLimit), "cpu_limit");
  EXPECT_EQ(ToString(Status::kMemoryLimit), "memory_limit");
  EXPECT_EQ(ToString(Status::kOutputLimit), "output_limit");
  EXPECT_EQ(ToString(Status::kViolation), "violation");
  EXPECT_EQ(ToString(Status::kSetupError), "setup_error");
  EXPECT_EQ(ToString(Status::kInternalError), "internal_error");
}

TEST(StatusNames, round_trip_through_ParseStatus) {
  for (Status status : kAllStatuses) EXPECT_EQ(ParseStatus(ToString(status)), status);
}

TEST(StatusNames, ParseStatus_rejects_an_unknown_name) {
  auto status = ParseStatus("crashed");
  ASSERT_FALSE(status);
  EXPECT_EQ(status.error().ToString(), "status: unknown status \"crashed\"");
}

TEST(ToJson, has_exactly_the_documented_keys) {
  json j = ToJson(Exited(0));
  EXPECT_EQ(Keys(j),
            (std::set<std::string>{"status", "exit_code", "signal", "stdout", "stderr",
                                   "stdout_truncated", "stderr_truncated", "usage", "limits_hit",
                                   "timings", "backend", "isolation", "warnings", "egress"}));
  EXPECT_EQ(Keys(j["usage"]), (std::set<std::string>{"wall_ms", "cpu_ms", "peak_memory_bytes"}));
  EXPECT_EQ(Keys(j["timings"]), (std::set<std::string>{"setup_ms", "boot_ms", "run_ms", "teardown_ms"}));
}

TEST(ToJson, copies_every_value) {
  RunResult r = Exited(3);
  r.stdout_data = "out";
  r.stderr_data = "err";
  r.stdout_truncated = true;
  r.usage = {10, 20, 30};
  r.limits_hit = {"pids"};
  r.timings = {1, 4, 2, 3};
  r.backend = "ns";
  r.isolation = "namespaces";
  r.Warn("memory limit enforced by RLIMIT_AS");
  json j = ToJson(r);
  EXPECT_EQ(j["status"], "exited");
  EXPECT_EQ(j["exit_code"], 3);
  EXPECT_EQ(j["stdout"], "out");
  EXPECT_EQ(j["stderr"], "err");
  EXPECT_EQ(j["stdout_truncated"], true);
  EXPECT_EQ(j["stderr_truncated"], false);
  EXPECT_EQ(j["usage"], (json{{"wall_ms", 10}, {"cpu_ms", 20}, {"peak_memory_bytes", 30}}));
  EXPECT_EQ(j["timings"], (json{{"setup_ms", 1}, {"boot_ms", 4}, {"run_ms", 2}, {"teardown_ms", 3}}));
  EXPECT_EQ(j["limits_hit"], json::array({"pids"}));
  EXPECT_EQ(j["backend"], "ns");
  EXPECT_EQ(j["isolation"], "namespaces");
  EXPECT_EQ(j["warnings"], json::array({"memory limit enforced by RLIMIT_AS"}));
}

TEST(ToJson, writes_empty_lists_as_arrays) {
  json j = ToJson(Exited(0));
  EXPECT_TRUE(j["limits_hit"].is_array());
  EXPECT_TRUE(j["warnings"].is_array());
}

TEST(ToJson, gives_an_exit_code_only_when_the_workload_exited) {
  EXPECT_EQ(ToJson(Exited(0))["exit_code"], 0);
  RunResult timeout = Killed(Status::kTimeout, SIGKILL);
  timeout.exit_code = 0;
  EXPECT_TRUE(ToJson(timeout)["exit_code"].is_null());
}

TEST(ToJson, gives_a_signal_only_when_there_was_one) {
  EXPECT_TRUE(ToJson(Exited(0))["signal"].is_null());
  EXPECT_EQ(ToJson(Killed(Status::kSignaled, SIGSEGV))["signal"], SIGSEGV);
}

TEST(ToJson, includes_the_error_only_when_there_is_one) {
  EXPECT_FALSE(ToJson(Exited(0)).contains("error"));
  RunResult r;
  r.status = Status::kSetupError;
  r.error = "mount /proc: Permission denied";
  json j = ToJson(r);
  EXPECT_EQ(j["status"], "setup_error");
  EXPECT_EQ(j["error"], "mount /proc: Permission denied");
}

TEST(ToJson, replaces_invalid_utf8_so_that_dump_never_throws) {
  RunResult r = Exited(0);
  r.stdout_data = "ok\xff\xfe";
  r.stderr_data = std::string("\0\x80", 2);
  r.error = "bad \xc3";
  r.Warn("\xed\xa0\x80");
  std::string text;
  ASSERT_NO_THROW(text = ToJson(r).dump());
  json back = json::parse(text);
  EXPECT_EQ(back["stdout"], "ok\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(back["stderr"], std::string("\0\xEF\xBF\xBD", 4));
  EXPECT_EQ(back["error"], "bad \xEF\xBF\xBD");
  EXPECT_EQ(back["warnings"][0], "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(ToValidUtf8, keeps_valid_text_unchanged) {
  std::string text = "plain, h\xC3\xA9, \xE2\x82\xAC, \xF0\x9F\x98\x80, \xF4\x8F\xBF\xBF";
  EXPECT_EQ(ToValidUtf8(text), text);
  EXPECT_EQ(ToValidUtf8(""), "");
}

TEST(ToValidUtf8, replaces_a_truncated_sequence_with_one_replacement_character) {
  EXPECT_EQ(ToValidUtf8("a\xE2\x82"), "a\xEF\xBF\xBD");
  EXPECT_EQ(ToValidUtf8("\xF0\x9F\x98z"), "\xEF\xBF\xBDz");
}

TEST(ToValidUtf8, replaces_overlong_forms_surrogates_and_out_of_range_code_points) {
  const std::string kBad = "\xEF\xBF\xBD";
  EXPECT_EQ(ToValidUtf8("\xC0\xAF"), kBad + kBad);                        // overlong '/'
  EXPECT_EQ(ToValidUtf8("\xE0\x80\xAF"), kBad + kBad + kBad);             // overlong, 3 bytes
  EXPECT_EQ(ToValidUtf8("\xED\xA0\x80"), kBad + kBad + kBad);             // U+D800
  EXPECT_EQ(ToValidUtf8("\xF4\x90\x80\x80"), kBad + kBad + kBad + kBad);  // U+110000
  EXPECT_EQ(ToValidUtf8("\xF8\x88\x80\x80\x80"), kBad + kBad + kBad + kBad + kBad);
}

TEST(CliExitCode, passes_the_workloads_own_exit_code_through) {
  EXPECT_EQ(CliExitCode(Exited(0)), 0);
  EXPECT_EQ(CliExitCode(Exited(3)), 3);
  EXPECT_EQ(CliExitCode(Exited(255)), 255);
}

TEST(CliExitCode, is_124_on_timeout_like_timeout1) {
  EXPECT_EQ(CliExitCode(Killed(Status::kTimeout, SIGKILL)), 124);
  EXPECT_EQ(CliExitCode(Killed(Status::kTimeout, 0)), 124);
}

TEST(CliExitCode, is_128_plus_the_signal_when_signaled) {
  EXPECT_EQ(CliExitCode(Killed(Status::kSignaled, SIGKILL)), 137);
  EXPECT_EQ(CliExitCode(Killed(Status::kSignaled, SIGTERM)), 143);
}

TEST(CliExitCode, is_128_plus_the_signal_when_killed_for_a_limit) {
  EXPECT_EQ(CliExitCode(Killed(Status::kCpuLimit, SIGXCPU)), 128 + SIGXCPU);
  EXPECT_EQ(CliExitCode(Killed(Status::kMemoryLimit, SIGKILL)), 137);
  EXPECT_EQ(CliExitCode(Killed(Status::kOutputLimit, SIGPIPE)), 128 + SIGPIPE);
  EXPECT_EQ(CliExitCode(Killed(Status::kViolation, SIGSYS)), 128 + SIGSYS);
}

TEST(CliExitCode, reads_a_limit_kill_without_a_signal_as_sigkill) {
  for (Status status :
       {Status::kCpuLimit, Status::kMemoryLimit, Status::kOutputLimit, Status::kViolation}) {
    EXPECT_EQ(CliExitCode(Killed(status, 0)), 137) << ToString(status);
  }
}

TEST(CliExitCode, is_125_for_setup_and_internal_errors) {
  EXPECT_EQ(CliExitCode(Killed(Status::kSetupError, 0)), 125);
  EXPECT_EQ(CliExitCode(Killed(Status::kInternalError, 0)), 125);
}

TEST(ResultFromJson, round_trips_every_field_of_every_status) {
  for (Status status : kAllStatuses) {
    RunResult r = Killed(status, status == Status::kExited ? 0 : SIGKILL);
    if (status == Status::kExited) r.exit_code = 3;
    r.stdout_data = "out";
    r.stderr_data = "err";
    r.stderr_truncated = true;
    r.usage = {10, 20, 30};
    r.limits_hit = {"pids", "storage"};
    r.timings = {1, 4, 2, 3};
    r.backend = "vm";
    r.isolation = "tcg";
    r.Warn("w");
    if (status == Status::kSetupError) r.error = "what failed";
    auto back = ResultFromJson(ToJson(r));
    ASSERT_TRUE(back) << back.error().ToString();
    EXPECT_EQ(ToJson(*back), ToJson(r)) << ToString(status);
  }
}

TEST(ResultFromJson, names_a_missing_or_mistyped_field) {
  json j = ToJson(Exited(0));
  j.erase("timings");
  auto missing = ResultFromJson(j);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().ToString(), "result: field timings is missing");
  j = ToJson(Exited(0));
  j["stdout"] = 5;
  auto mistyped = ResultFromJson(j);
  ASSERT_FALSE(mistyped);
  EXPECT_EQ(mistyped.error().ToString(), "result: stdout must be a string");
  j = ToJson(Exited(0));
  j["status"] = "finished";
  EXPECT_FALSE(ResultFromJson(j));
}

TEST(ResultFromJson, refuses_a_float_or_out_of_range_number_naming_its_field) {
  json j = ToJson(Exited(0));
  j["usage"]["wall_ms"] = 1e43;
  auto as_float = ResultFromJson(j);
  ASSERT_FALSE(as_float);
  EXPECT_EQ(as_float.error().ToString(), "result: usage.wall_ms must be an integer");
  j = ToJson(Exited(0));
  j["exit_code"] = 1LL << 40;
  auto out_of_range = ResultFromJson(j);
  ASSERT_FALSE(out_of_range);
  EXPECT_EQ(out_of_range.error().ToString(), "result: exit_code is out of range");
}

}  // namespace
}  // namespace smolbox
