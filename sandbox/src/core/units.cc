#include "smolbox/units.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <numeric>
#include <string>
#include <utility>

namespace smolbox {
namespace {

// A decimal "12.5" followed by a unit suffix, split but not yet scaled.
struct Quantity {
  std::string_view whole;
  std::string_view frac;  // trailing zeros stripped
  std::string_view suffix;
};

struct Suffix {
  std::string_view name;
  int64_t scale;
};

// Nine decimal places is finer than any unit here needs, and it keeps the
// fractional numerator below 10^9 so scaling it never overflows.
constexpr size_t kMaxFracDigits = 9;
constexpr int64_t kMiB = int64_t{1} << 20;

// Bare numbers are milliseconds, as the spec's *_ms fields are.
constexpr std::array kDurationSuffixes = {
    Suffix{"", 1}, Suffix{"ms", 1}, Suffix{"s", 1000}, Suffix{"m", 60'000}, Suffix{"h", 3'600'000},
};

// Binary multiples, as docker reads them; matched case-insensitively. Bare
// numbers are MiB, the unit of the spec's *_mib fields.
constexpr std::array kSizeSuffixes = {
    Suffix{"", kMiB},
    Suffix{"b", 1},
    Suffix{"k", 1 << 10},
    Suffix{"kib", 1 << 10},
    Suffix{"m", kMiB},
    Suffix{"mib", kMiB},
    Suffix{"g", int64_t{1} << 30},
    Suffix{"gib", int64_t{1} << 30},
    Suffix{"t", int64_t{1} << 40},
    Suffix{"tib", int64_t{1} << 40},
};

std::unexpected<Error> Fail(std::string reason) {
  return std::unexpected(Error{"", std::move(reason), 0});
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string_view TakeDigits(std::string_view text, size_t& pos) {
  size_t start = pos;
  while (pos < text.size() && IsDigit(text[pos])) ++pos;
  return text.substr(start, pos - start);
}

Expected<Quantity> Split(std::string_view text, std::string_view kind, std::string_view example) {
  if (text.empty()) return Fail("is empty");
  if (text.front() == '-') return Fail(fmt::format("must not be negative (got {:?})", text));
  Quantity q;
  size_t pos = 0;
  q.whole = TakeDigits(text, pos);
  bool has_point = pos < text.size() && text[pos] == '.';
  if (has_point) q.frac = TakeDigits(text, ++pos);
  q.suffix = text.substr(pos);
  if (q.whole.empty() || (has_point && q.frac.empty())) {
    return Fail(fmt::format("{:?} is not a {} (e.g. {})", text, kind, example));
  }
  while (!q.frac.empty() && q.frac.back() == '0') q.frac.remove_suffix(1);
  if (q.frac.size() > kMaxFracDigits) {
    return Fail(fmt::format("{:?} has too many decimal places", text));
  }
  return q;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return std::ranges::equal(a, b, [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

template <size_t N>
const Suffix* FindSuffix(const std::array<Suffix, N>& table, std::string_view name,
                         bool ignore_case) {
  for (const Suffix& s : table) {
    if (ignore_case ? EqualsIgnoreCase(s.name, name) : s.name == name) return &s;
  }
  return nullptr;
}

// whole.frac * scale, exactly: a remainder below the base unit is an error, not
// a silent rounding.
Expected<int64_t> Scale(const Quantity& q, int64_t scale, std::string_view text,
                        std::string_view base_unit) {
  int64_t whole = 0;
  auto parsed = std::from_chars(q.whole.data(), q.whole.data() + q.whole.size(), whole);
  int64_t total = 0;
  if (parsed.ec != std::errc{} || __builtin_mul_overflow(whole, scale, &total)) {
    return Fail(fmt::format("{:?} is too large", text));
  }
  int64_t frac = 0;
  int64_t denom = 1;
  std::from_chars(q.frac.data(), q.frac.data() + q.frac.size(), frac);
  for (size_t i = 0; i < q.frac.size(); ++i) denom *= 10;
  // frac/denom * scale is whole iff (denom/g) divides frac, with g = gcd(scale, denom).
  int64_t g = std::gcd(scale, denom);
  if (frac % (denom / g) != 0) {
    return Fail(fmt::format("{:?} is not a whole number of {}", text, base_unit));
  }
  if (__builtin_add_overflow(total, frac / (denom / g) * (scale / g), &total)) {
    return Fail(fmt::format("{:?} is too large", text));
  }
  return total;
}

}  // namespace

Expected<int64_t> ParseDuration(std::string_view text) {
  constexpr std::string_view kExample = "250ms, 2s, 1.5m";
  SMOLBOX_ASSIGN_OR_RETURN(auto q, Split(text, "duration", kExample));
  const Suffix* suffix = FindSuffix(kDurationSuffixes, q.suffix, /*ignore_case=*/false);
  if (suffix == nullptr)
    return Fail(fmt::format("{:?} is not a duration (e.g. {})", text, kExample));
  return Scale(q, suffix->scale, text, "milliseconds");
}

Expected<int64_t> ParseBytes(std::string_view text) {
  constexpr std::string_view kExample = "512K, 64M, 2G";
  SMOLBOX_ASSIGN_OR_RETURN(auto q, Split(text, "size", kExample));
  const Suffix* suffix = FindSuffix(kSizeSuffixes, q.suffix, /*ignore_case=*/true);
  if (suffix == nullptr) return Fail(fmt::format("{:?} is not a size (e.g. {})", text, kExample));
  return Scale(q, suffix->scale, text, "bytes");
}

Expected<int64_t> ParseSizeMiB(std::string_view text) {
  auto bytes = ParseBytes(text);
  if (!bytes) return bytes;
  if (*bytes % kMiB != 0) return Fail(fmt::format("{:?} is not a whole number of MiB", text));
  return *bytes / kMiB;
}

}  // namespace smolbox
