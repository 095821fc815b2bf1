#include "battery/oracles.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace smolvm_check {
namespace {

using Check = std::optional<std::string>;  // a failure reason, or nothing

// Detections that only the case aimed at them may count: a kill(-1, SIGURG) reaches every
// case's detector, and must not fail the innocent cases running beside it.
bool CountsFor(const Case& c, const std::string& detection) {
  if (detection.starts_with("SIGURG")) return c.HasOracle("sigurg");
  if (detection.starts_with("TIOCSTI")) return c.HasOracle("tty");
  return c.HasOracle("canaries");
}

std::string FirstLineWith(const std::string& text, size_t pos) {
  size_t begin = text.rfind('\n', pos);
  begin = begin == std::string::npos ? 0 : begin + 1;
  size_t end = text.find('\n', pos);
  return text.substr(begin, std::min<size_t>(end - begin, 160));
}

Check Canaries(const Case& c, const Evidence& e) {
  if (c.HasOracle("canaries") && !e.leaked_canaries.empty()) {
    return fmt::format("canary token leaked: {}", fmt::join(e.leaked_canaries, ", "));
  }
  for (const auto& d : e.detections) {
    if (CountsFor(c, d)) return "host-side detector: " + d;
  }
  return std::nullopt;
}

Check Forbidden(const Case& c, const Evidence& e) {
  for (const auto& pattern : c.expect.forbid) {
    std::regex re(pattern);
    for (const auto* stream : {&e.stdout_data, &e.stderr_data}) {
      std::smatch m;
      if (std::regex_search(*stream, m, re)) {
        return fmt::format("output matched /{}/: {}", pattern,
                           FirstLineWith(*stream, static_cast<size_t>(m.position(0))));
      }
    }
  }
  return std::nullopt;
}

Check Count(const Case& c, const Evidence& e) {
  if (!c.expect.max_count) return std::nullopt;
  const MaxCount& mc = *c.expect.max_count;
  std::regex re(mc.pattern);
  int64_t highest = -1;
  for (auto it = std::sregex_iterator(e.stdout_data.begin(), e.stdout_data.end(), re);
       it != std::sregex_iterator(); ++it) {
    std::string digits = it->str(1);
    int64_t value = mc.max + 1;  // a number too long to parse is over any limit
    std::from_chars(digits.data(), digits.data() + digits.size(), value);
    highest = std::max(highest, value);
  }
  if (highest > mc.max) return fmt::format("/{}/ reached {}, over the limit {}", mc.pattern, highest, mc.max);
  return std::nullopt;
}

Check StatusAndTime(const Case& c, const Evidence& e) {
  const auto& allowed = c.expect.status;
  if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), e.status) == allowed.end()) {
    return fmt::format("status {}, expected {}", e.status, fmt::join(allowed, " or "));
  }
  if (c.expect.max_wall_ms > 0 && e.wall_ms > c.expect.max_wall_ms) {
    std::string account = e.sandbox_timings.empty() ? "" : fmt::format(" (the sandbox's timings: {})", e.sandbox_timings);
    return fmt::format("ran {} ms, over the bound of {} ms{}", e.wall_ms, c.expect.max_wall_ms, account);
  }
  return std::nullopt;
}

Check Results(const Case& c, const Evidence& e) {
  for (const auto& needle : c.expect.stdout_contains) {
    if (e.stdout_data.find(needle) == std::string::npos) {
      return fmt::format("stdout lacks \"{}\"", needle);
    }
  }
  for (const auto& [path, content] : c.expect.outputs) {
    auto found = e.outputs.find(path);
    if (found == e.outputs.end()) return fmt::format("output {} is missing", path);
    if (found->second != content) return fmt::format("output {} differs from what was expected", path);
  }
  return std::nullopt;
}

Check Aftermath(const Case& c, const Evidence& e) {
  if (c.HasOracle("leftovers") && !e.leftovers.empty()) {
    return fmt::format("left behind: {}", fmt::join(e.leftovers, "; "));
  }
  if (c.HasOracle("writes") && !e.stray_writes.empty()) {
    return fmt::format("stray or unsafe writes: {}", fmt::join(e.stray_writes, "; "));
  }
  return std::nullopt;
}

}  // namespace

std::string ToString(Verdict verdict) {
  switch (verdict) {
    case Verdict::kPass: return "pass";
    case Verdict::kFail: return "fail";
    case Verdict::kError: return "error";
    case Verdict::kSkip: return "skip";
  }
  return "error";
}

Judgement Judge(const Case& c, const Evidence& evidence) {
  if (!evidence.setup_error.empty()) return {Verdict::kError, evidence.setup_error};
  // Evidence of a breach first: it says more than a status or a time does.
  for (auto check : {Canaries, Forbidden, Count, StatusAndTime, Results, Aftermath}) {
    if (Check reason = check(c, evidence)) return {Verdict::kFail, *reason};
  }
  return {Verdict::kPass, ""};
}

}  // namespace smolvm_check
