#include "smolbox/result.h"

#include <array>
#include <nlohmann/json.hpp>
#include <utility>

#include "exec_protocol.h"
#include "json_message.h"

namespace smolbox {
namespace {

constexpr std::array<std::pair<Status, std::string_view>, 9> kStatusNames = {{
    {Status::kExited, "exited"},
    {Status::kSignaled, "signaled"},
    {Status::kTimeout, "timeout"},
    {Status::kCpuLimit, "cpu_limit"},
    {Status::kMemoryLimit, "memory_limit"},
    {Status::kOutputLimit, "output_limit"},
    {Status::kViolation, "violation"},
    {Status::kSetupError, "setup_error"},
    {Status::kInternalError, "internal_error"},
}};

// Length of the valid UTF-8 sequence at text[0], or 0 with `bad` set to the
// length of its longest valid prefix ("maximal subpart", which Unicode
// recommends replacing with one U+FFFD).
size_t Utf8SequenceLength(std::string_view text, size_t& bad) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 1;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 2;
    if (lead == 0xE0) lo = 0xA0;  // overlong
    if (lead == 0xED) hi = 0x9F;  // UTF-16 surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 3;
    if (lead == 0xF0) lo = 0x90;  // overlong
    if (lead == 0xF4) hi = 0x8F;  // above U+10FFFF
  }
  size_t ok = 1;
  while (ok <= need && ok < text.size()) {
    unsigned char b = byte(ok);
    bool in_range = ok == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!in_range) break;
    ++ok;
  }
  if (need > 0 && ok == need + 1) return ok;
  bad = ok;
  return 0;
}

}  // namespace

// Workload output is arbitrary bytes; nlohmann's dump() throws on invalid UTF-8,
// so every string goes through here and dump() cannot fail. The cost is that
// binary output is lossy in JSON: callers who need the bytes use the raw streams.
std::string ToValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    size_t bad = 0;
    size_t len = Utf8SequenceLength(text, bad);
    if (len > 0) {
      out.append(text.substr(0, len));
      text.remove_prefix(len);
    } else {
      out.append("\xEF\xBF\xBD");
      text.remove_prefix(bad);
    }
  }
  return out;
}

std::string ToString(Status status) {
  for (const auto& [value, name] : kStatusNames) {
    if (value == status) return std::string(name);
  }
  return "unknown";
}

Expected<Status> ParseStatus(const std::string& name) {
  for (const auto& [value, known] : kStatusNames) {
    if (known == name) return value;
  }
  return std::unexpected(Error{"status", "unknown status \"" + ToValidUtf8(name) + "\"", 0});
}

void to_json(nlohmann::json& j, const Status& status) { j = ToString(status); }

void from_json(const nlohmann::json& j, Status& status) {
  auto parsed = ParseStatus(j.get<std::string>());
  if (!parsed) throw nlohmann::json::other_error::create(501, parsed.error().what, &j);
  status = *parsed;
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Usage, wall_ms, cpu_ms, peak_memory_bytes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Timings, setup_ms, boot_ms, run_ms, teardown_ms)
// Its strings are the gateway's own words and names as the resolver spells them (ldns escapes
// every byte outside printable ASCII), or printable ASCII from the first bytes.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(EgressEvent, kind, name, address, port, type, allowed, reason,
                                   bytes_in, bytes_out)

// By hand, not by the macros: stdout and stderr are named apart from their fields, exit_code
// and signal are null when they say nothing, error is left out when there is none, and every
// string is made valid UTF-8.
void to_json(nlohmann::json& j, const RunResult& r) {
  auto strings = [](const std::vector<std::string>& list) {
    nlohmann::json out = nlohmann::json::array();
    for (const std::string& s : list) out.push_back(ToValidUtf8(s));
    return out;
  };
  j = {
      {"status", r.status},
      {"exit_code", r.status == Status::kExited ? nlohmann::json(r.exit_code) : nullptr},
      {"signal", r.signal != 0 ? nlohmann::json(r.signal) : nullptr},
      {"stdout", ToValidUtf8(r.stdout_data)},
      {"stderr", ToValidUtf8(r.stderr_data)},
      {"stdout_truncated", r.stdout_truncated},
      {"stderr_truncated", r.stderr_truncated},
      {"usage", r.usage},
      {"limits_hit", strings(r.limits_hit)},
      {"timings", r.timings},
      {"backend", ToValidUtf8(r.backend)},
      {"isolation", ToValidUtf8(r.isolation)},
      {"warnings", strings(r.warnings)},
      {"egress", r.egress},
  };
  if (!r.error.empty()) j["error"] = ToValidUtf8(r.error);
}

void from_json(const nlohmann::json& j, RunResult& r) {
  j.at("status").get_to(r.status);
  if (!j.at("exit_code").is_null()) j.at("exit_code").get_to(r.exit_code);
  if (!j.at("signal").is_null()) j.at("signal").get_to(r.signal);
  j.at("stdout").get_to(r.stdout_data);
  j.at("stderr").get_to(r.stderr_data);
  j.at("stdout_truncated").get_to(r.stdout_truncated);
  j.at("stderr_truncated").get_to(r.stderr_truncated);
  j.at("usage").get_to(r.usage);
  j.at("limits_hit").get_to(r.limits_hit);
  j.at("timings").get_to(r.timings);
  j.at("backend").get_to(r.backend);
  j.at("isolation").get_to(r.isolation);
  j.at("warnings").get_to(r.warnings);
  j.at("egress").get_to(r.egress);
  if (j.contains("error")) j.at("error").get_to(r.error);
}

nlohmann::json ToJson(const RunResult& r) { return r; }

nlohmann::json SetupToJson(const RunResult& setup) {
  nlohmann::json all = ToJson(setup);
  nlohmann::json j = nlohmann::json::object();
  for (const char* key : {"status", "timings", "backend", "isolation", "warnings", "error"}) {
    if (all.contains(key)) j[key] = std::move(all[key]);
  }
  return j;
}

namespace {

// For the shape (json_message.h), a result whose encoding has every field: an exit's code, a
// signal, an error, and an entry in each list to give its kind.
RunResult ResultSample() {
  RunResult sample;
  sample.status = Status::kExited;
  sample.signal = 1;
  sample.limits_hit = {""};
  sample.warnings = {""};
  sample.egress = {EgressEvent{}};
  sample.error = "-";
  return sample;
}

}  // namespace

Expected<RunResult> ResultFromJson(const nlohmann::json& j) {
  static const MessageShape shape(ResultSample(), {"error"}, {"exit_code", "signal"});
  return DecodeMessage<RunResult>(j, shape, "result");
}

int CliExitCode(const RunResult& r) {
  // A kill for a limit with no signal recorded still reads as SIGKILL, as docker reports OOM.
  auto killed = [&] { return r.signal != 0 ? 128 + r.signal : 137; };
  switch (r.status) {
    case Status::kExited:
      return r.exit_code;
    case Status::kTimeout:
      return 124;
    case Status::kSignaled:
    case Status::kCpuLimit:
    case Status::kMemoryLimit:
    case Status::kOutputLimit:
    case Status::kViolation:
      return killed();
    case Status::kSetupError:
    case Status::kInternalError:
      return 125;
  }
  return 125;
}

}  // namespace smolbox
