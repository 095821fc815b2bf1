// The messages smolbox's parts send each other (json_message.h), against a hostile or broken
// peer: each decoder names the message and the field in its own words, never nlohmann's, and
// refuses a float or an out-of-range number where an integer belongs rather than casting it.
// The control socket's exec order has the same cases in tests/persist/control_protocol_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exec_protocol.h"
#include "guest_protocol.h"
#include "smolbox/result.h"

namespace smolbox {
namespace {

using nlohmann::json;

// A decoder under test: a valid message's header and tail, and how its error reads.
struct Decoder {
  std::string name;
  json header;
  std::string tail;
  std::function<std::string(const json& header, const std::string& tail)> error_of;
};

template <typename T>
std::string ErrorOf(const Expected<T>& decoded) {
  return decoded ? std::string("<no error>") : decoded.error().ToString();
}

ExecRequest SomeExec() {
  ExecRequest r;
  r.argv = {"/usr/bin/python3", "-c", "print(input())"};
  r.env = {{"PATH", "/usr/bin"}, {"HOME", "/work"}};
  r.cwd = "/work";
  r.uid = 1000;
  r.gid = 1001;
  r.timeout_ms = 30000;
  r.cpu_ms = 20000;
  r.output_bytes = 1 << 20;
  r.files = 256;
  r.memory_bytes = 1 << 29;
  r.nproc = 64;
  r.fsize_bytes = 1 << 27;
  r.stdin_stream = true;
  return r;
}

ExecReport SomeExit() {
  ExecReport r;
  r.status = Status::kMemoryLimit;
  r.exit_code = -1;
  r.signal = 9;
  r.wall_ms = 1000;
  r.cpu_ms = 990;
  r.peak_memory_bytes = 5000000;
  r.stdout_truncated = true;
  r.error = "killed";
  r.limits_hit = {"pids", "memory"};
  return r;
}

GuestSetup SomeSetup() {
  GuestSetup s;
  s.volumes = {{"/in", true, "vol0", ""}, {"/out", false, "", "volumes/1"}};
  s.workdir = "/work";
  s.uid = 1000;
  s.gid = 1000;
  s.memory_bytes = 1 << 29;
  s.pids = 64;
  s.cpus = 0.5;
  s.hostname = "vmbox";
  s.writable_root_mib = 16;
  s.root_files = {{"/etc/hosts", "127.0.0.1 localhost\n"}};
  s.prewarm = "python";
  return s;
}

GuestRestore SomeRestore() {
  GuestRestore r;
  r.seed = std::string(kRestoreSeedBytes, 's');
  r.realtime_sec = 1700000000;
  r.realtime_nsec = 123456789;
  r.hostname = "box";
  return r;
}

RunResult SomeResult() {
  RunResult r;
  r.status = Status::kExited;
  r.exit_code = 3;
  r.stdout_data = "out";
  r.stderr_data = "err";
  r.stdout_truncated = true;
  r.usage = {10, 20, 30};
  r.limits_hit = {"pids"};
  r.timings = {1, 4, 2, 3};
  r.backend = "vm";
  r.isolation = "tcg";
  r.warnings = {"cpu: rlimit only"};
  r.error = "";
  return r;
}

std::vector<Decoder> AllDecoders() {
  channel::Message restore = EncodeGuestRestore(SomeRestore());
  return {
      {"exec message", EncodeExec(SomeExec()).header, "",
       [](const json& h, const std::string& t) {
         return ErrorOf(DecodeExec({h, t}));
       }},
      {"exit message", EncodeExit(SomeExit()).header, "",
       [](const json& h, const std::string& t) {
         return ErrorOf(DecodeExit({h, t}));
       }},
      {"setup message", EncodeGuestSetup(SomeSetup()).header, "",
       [](const json& h, const std::string& t) {
         return ErrorOf(DecodeGuestSetup({h, t}));
       }},
      {"restored message", restore.header, restore.tail,
       [](const json& h, const std::string& t) {
         return ErrorOf(DecodeGuestRestore({h, t}));
       }},
      {"result", ToJson(SomeResult()), "",
       [](const json& h, const std::string&) { return ErrorOf(ResultFromJson(h)); }},
  };
}

// Each decoder's valid message with one field changed (a JSON pointer), and the error it gives.
struct Mutation {
  std::string decoder;
  std::string pointer;
  json value;  // discarded: the field is removed
  std::string error;
};

const json kRemoved = json::value_t::discarded;

std::string Decode(const Decoder& decoder, const Mutation& m) {
  json header = decoder.header;
  json::json_pointer at(m.pointer);
  if (m.value.is_discarded()) {
    header[at.parent_pointer()].erase(at.back());
  } else {
    header[at] = m.value;
  }
  return decoder.error_of(header, decoder.tail);
}

void ExpectErrors(const std::vector<Mutation>& mutations) {
  for (const Decoder& decoder : AllDecoders()) {
    for (const Mutation& m : mutations) {
      if (m.decoder != decoder.name) continue;
      std::string error = Decode(decoder, m);
      EXPECT_EQ(error, m.error) << m.pointer;
      EXPECT_EQ(error.find("json.exception"), std::string::npos) << error;
    }
  }
}

// As ExpectErrors, with at least one case for each decoder.
void ExpectErrorsOfEach(const std::vector<Mutation>& mutations) {
  for (const Decoder& decoder : AllDecoders()) {
    EXPECT_TRUE(std::any_of(mutations.begin(), mutations.end(), [&](const Mutation& m) {
      return m.decoder == decoder.name;
    })) << decoder.name;
  }
  ExpectErrors(mutations);
}

TEST(DecodeMessage, accepts_each_decoders_valid_message) {
  for (const Decoder& decoder : AllDecoders()) {
    EXPECT_EQ(decoder.error_of(decoder.header, decoder.tail), "<no error>") << decoder.name;
  }
}

TEST(DecodeMessage, names_the_message_and_a_missing_field) {
  ExpectErrorsOfEach({
      {"exec message", "/cwd", kRemoved, "exec message: field cwd is missing"},
      {"exec message", "/stdin_stream", kRemoved, "exec message: field stdin_stream is missing"},
      {"exit message", "/peak_memory_bytes", kRemoved,
       "exit message: field peak_memory_bytes is missing"},
      {"setup message", "/pids", kRemoved, "setup message: field pids is missing"},
      {"setup message", "/volumes/1/tag", kRemoved,
       "setup message: field volumes[1].tag is missing"},
      {"restored message", "/hostname", kRemoved, "restored message: field hostname is missing"},
      {"result", "/timings", kRemoved, "result: field timings is missing"},
      {"result", "/usage/cpu_ms", kRemoved, "result: field usage.cpu_ms is missing"},
      {"result", "/exit_code", kRemoved, "result: field exit_code is missing"},
  });
}

TEST(DecodeMessage, names_the_message_and_a_field_of_the_wrong_kind) {
  ExpectErrorsOfEach({
      {"exec message", "/cwd", 5, "exec message: cwd must be a string"},
      {"exec message", "/argv/1", true, "exec message: argv[1] must be a string"},
      {"exec message", "/env/HOME", json::array(), R"(exec message: env["HOME"] must be a string)"},
      {"exec message", "/env", json::array(), "exec message: env must be an object"},
      {"exec message", "/stdin_stream", 1, "exec message: stdin_stream must be a bool"},
      {"exit message", "/status", 5, "exit message: status must be a string"},
      {"exit message", "/limits_hit", "pids", "exit message: limits_hit must be a list"},
      {"exit message", "/uid", 5, "<no error>"},  // a field it does not know is ignored
      {"setup message", "/volumes/0", "/in", "setup message: volumes[0] must be an object"},
      {"setup message", "/volumes/1/read_only", "no",
       "setup message: volumes[1].read_only must be a bool"},
      {"setup message", "/cpus", "1", "setup message: cpus must be a finite number"},
      {"setup message", "/ca_bundle", "-----BEGIN PRIVATE KEY-----\nAA\n-----END PRIVATE KEY-----\n",
       "setup message: ca_bundle: line 1: a PRIVATE KEY block; a trust store takes CERTIFICATE blocks only"},
      {"setup message", "/prewarm", "node", "setup message: prewarm must be python or empty"},
      {"restored message", "/realtime_sec", nullptr,
       "restored message: realtime_sec must be an integer"},
      {"result", "/stdout", 5, "result: stdout must be a string"},
      {"result", "/usage", 5, "result: usage must be an object"},
      {"result", "/warnings/0", 1, "result: warnings[0] must be a string"},
      {"result", "/error", nullptr, "result: error must be a string"},
      {"result", "/signal", "9", "result: signal must be an integer"},
  });
}

TEST(DecodeMessage, refuses_a_float_where_an_integer_belongs) {
  ExpectErrorsOfEach({
      {"exec message", "/uid", 1000.5, "exec message: uid must be an integer"},
      {"exec message", "/timeout_ms", 1.0, "exec message: timeout_ms must be an integer"},
      {"exit message", "/exit_code", 0.5, "exit message: exit_code must be an integer"},
      {"setup message", "/memory_bytes", 2.5, "setup message: memory_bytes must be an integer"},
      {"restored message", "/realtime_nsec", 0.25,
       "restored message: realtime_nsec must be an integer"},
      {"result", "/usage/wall_ms", 1.5, "result: usage.wall_ms must be an integer"},
  });
}

TEST(DecodeMessage, refuses_a_huge_float_before_any_cast) {
  // nlohmann reads an integer literal beyond 64 bits as a float too.
  json beyond_64_bits = json::parse("123456444444444444444444444444444444444789");
  ExpectErrorsOfEach({
      {"exec message", "/cpu_ms", 1e300, "exec message: cpu_ms must be an integer"},
      {"exit message", "/cpu_ms", 1e43, "exit message: cpu_ms must be an integer"},
      {"setup message", "/pids", -1e300, "setup message: pids must be an integer"},
      {"setup message", "/cpus", 1e300, "setup message: cpus must be from 0 to 1024 (got 1e+300)"},
      {"restored message", "/realtime_nsec", beyond_64_bits,
       "restored message: realtime_nsec must be an integer"},
      {"result", "/timings/run_ms", 1e300, "result: timings.run_ms must be an integer"},
  });
}

TEST(DecodeMessage, refuses_an_integer_out_of_its_fields_range_rather_than_wrapping_it) {
  constexpr uint64_t kAboveInt64 = uint64_t{std::numeric_limits<int64_t>::max()} + 1;
  ExpectErrorsOfEach({
      {"exec message", "/uid", int64_t{1} << 40, "exec message: uid is out of range"},
      {"exec message", "/gid", -1, "exec message: gid is out of range"},
      {"exec message", "/memory_bytes", kAboveInt64, "exec message: memory_bytes is out of range"},
      {"exit message", "/signal", int64_t{1} << 40, "exit message: signal is out of range"},
      {"exit message", "/wall_ms", kAboveInt64, "exit message: wall_ms is out of range"},
      {"setup message", "/uid", -1, "setup message: uid is out of range"},
      {"restored message", "/realtime_sec", std::numeric_limits<uint64_t>::max(),
       "restored message: realtime_sec is out of range"},
      {"result", "/exit_code", int64_t{1} << 40, "result: exit_code is out of range"},
      {"result", "/usage/peak_memory_bytes", kAboveInt64,
       "result: usage.peak_memory_bytes is out of range"},
  });
}

TEST(DecodeMessage, keeps_each_decoders_own_checks) {
  ExpectErrors({
      {"exec message", "/argv", json::array(), "exec message: argv is empty"},
      {"exit message", "/status", "finished", R"(exit message: unknown status "finished")"},
      {"setup message", "/cpus", -0.5, "setup message: cpus must be from 0 to 1024 (got -0.5)"},
      {"setup message", "/hostname", std::string(65, 'h'),
       "setup message: the hostname must be 1 to 64 bytes"},
      {"result", "/status", "finished", R"(result: unknown status "finished")"},
  });
  GuestRestore short_seed = SomeRestore();
  short_seed.seed = "s";
  EXPECT_EQ(ErrorOf(DecodeGuestRestore(EncodeGuestRestore(short_seed))),
            "restored message: the seed is 1 bytes, not 64");
}

TEST(DecodeMessage, lets_a_message_leave_out_or_null_only_the_fields_that_may_be) {
  ExpectErrors({
      {"exit message", "/limits_hit", kRemoved, "<no error>"},
      {"result", "/error", kRemoved, "<no error>"},
      {"result", "/exit_code", nullptr, "<no error>"},
      {"result", "/signal", nullptr, "<no error>"},
      {"result", "/backend", nullptr, "result: backend must be a string"},
  });
}

TEST(DecodeMessage, refuses_a_message_that_is_not_an_object) {
  EXPECT_EQ(ErrorOf(ResultFromJson(json::array())), "result: is not an object");
}

TEST(DecodeExec, round_trips_every_field) {
  ExecRequest sent = SomeExec();
  sent.uid = std::numeric_limits<uint32_t>::max();
  sent.memory_bytes = std::numeric_limits<int64_t>::max();
  sent.fsize_bytes = std::numeric_limits<int64_t>::min();
  auto back = DecodeExec(EncodeExec(sent));
  ASSERT_TRUE(back) << back.error().ToString();
  EXPECT_EQ(EncodeExec(*back).header, EncodeExec(sent).header);
  EXPECT_EQ(back->argv, sent.argv);
  EXPECT_EQ(back->env, sent.env);
  EXPECT_EQ(back->uid, sent.uid);
  EXPECT_EQ(back->fsize_bytes, sent.fsize_bytes);
  EXPECT_TRUE(back->stdin_stream);
}

TEST(DecodeExit, round_trips_every_field) {
  ExecReport sent = SomeExit();
  auto back = DecodeExit(EncodeExit(sent));
  ASSERT_TRUE(back) << back.error().ToString();
  EXPECT_EQ(EncodeExit(*back).header, EncodeExit(sent).header);
  EXPECT_EQ(back->status, Status::kMemoryLimit);
  EXPECT_EQ(back->limits_hit, sent.limits_hit);
  EXPECT_EQ(back->error, "killed");
}

TEST(DecodeGuestSetup, round_trips_every_field) {
  GuestSetup sent = SomeSetup();
  auto back = DecodeGuestSetup(EncodeGuestSetup(sent));
  ASSERT_TRUE(back) << back.error().ToString();
  EXPECT_EQ(EncodeGuestSetup(*back).header, EncodeGuestSetup(sent).header);
  ASSERT_EQ(back->volumes.size(), 2u);
  EXPECT_EQ(back->volumes[1].storage_dir, "volumes/1");
  EXPECT_FALSE(back->volumes[1].read_only);
  EXPECT_EQ(back->cpus, 0.5);
}

TEST(DecodeGuestRestore, round_trips_every_field_and_the_seed) {
  GuestRestore sent = SomeRestore();
  auto back = DecodeGuestRestore(EncodeGuestRestore(sent));
  ASSERT_TRUE(back) << back.error().ToString();
  EXPECT_EQ(back->seed, sent.seed);
  EXPECT_EQ(back->realtime_sec, sent.realtime_sec);
  EXPECT_EQ(back->realtime_nsec, sent.realtime_nsec);
  EXPECT_EQ(back->hostname, "box");
}

TEST(ResultFromJson, round_trips_a_result_with_every_field_set) {
  RunResult sent = SomeResult();
  sent.error = "what failed";
  auto back = ResultFromJson(ToJson(sent));
  ASSERT_TRUE(back) << back.error().ToString();
  EXPECT_EQ(ToJson(*back), ToJson(sent));
  EXPECT_EQ(back->exit_code, 3);
  EXPECT_EQ(back->error, "what failed");
}

// The agent in the guest image and the host must agree, and fuzz/corpus holds these shapes.
TEST(EncodeMessages, keep_the_wire_format) {
  EXPECT_EQ(
      EncodeExec(SomeExec()).header.dump(),
      R"json({"argv":["/usr/bin/python3","-c","print(input())"],"cpu_ms":20000,"cwd":"/work",)json"
      R"("env":{"HOME":"/work","PATH":"/usr/bin"},"files":256,"fsize_bytes":134217728,)"
      R"("gid":1001,"memory_bytes":536870912,"nproc":64,"output_bytes":1048576,)"
      R"("stdin_stream":true,"timeout_ms":30000,"type":"exec","uid":1000})");
  EXPECT_EQ(EncodeExit(SomeExit()).header.dump(),
            R"({"cpu_ms":990,"error":"killed","exit_code":-1,"limits_hit":["pids","memory"],)"
            R"("peak_memory_bytes":5000000,"signal":9,"status":"memory_limit",)"
            R"("stderr_truncated":false,"stdout_truncated":true,"type":"exit","wall_ms":1000})");
  EXPECT_EQ(EncodeGuestSetup(SomeSetup()).header.dump(),
            R"({"ca_bundle":"","cpus":0.5,"egress":false,"gid":1000,"hostname":"vmbox","image_root":false,"memory_bytes":536870912,"pids":64,)"
            R"("prewarm":"python","root_files":{"/etc/hosts":"127.0.0.1 localhost\n"},"type":"setup",)"
            R"("uid":1000,"volumes":[{"read_only":true,"storage_dir":"","tag":"vol0",)"
            R"("target":"/in"},{"read_only":false,"storage_dir":"volumes/1","tag":"",)"
            R"("target":"/out"}],"workdir":"/work","writable_root_mib":16})");
  channel::Message restore = EncodeGuestRestore(SomeRestore());
  EXPECT_EQ(restore.header.dump(),
            R"({"hostname":"box","realtime_nsec":123456789,"realtime_sec":1700000000,)"
            R"("type":"restored"})");
  EXPECT_EQ(restore.tail, SomeRestore().seed);
  EXPECT_EQ(ToJson(SomeResult()).dump(),
            R"({"backend":"vm","egress":[],"exit_code":3,"isolation":"tcg","limits_hit":["pids"],)"
            R"("signal":null,"status":"exited","stderr":"err","stderr_truncated":false,)"
            R"("stdout":"out","stdout_truncated":true,"timings":{"boot_ms":4,"run_ms":2,)"
            R"("setup_ms":1,"teardown_ms":3},"usage":{"cpu_ms":20,"peak_memory_bytes":30,)"
            R"("wall_ms":10},"warnings":["cpu: rlimit only"]})");
}

}  // namespace
}  // namespace smolbox
