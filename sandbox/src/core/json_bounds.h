// Bounds on every JSON document the project reads: a spec, a profile, the catalog, a channel
// message from the agent or a control client, a QMP reply from QEMU, a sandbox's result.
//
// The size is checked first, then one pass over the text counts nesting and values, and only a
// document within all three bounds reaches nlohmann. Depth alone is not enough: nlohmann spends
// about 100 bytes on each value (an empty object is a map plus its slot), so 8 MiB of "{}," take
// 290 MB once parsed; a value count holds that to a few MB.
//
//   auto doc = smolbox::ParseBoundedJson(text, {.max_bytes = 1 << 20}, "guest message");
//   SMOLBOX_TRY(doc);
//   // "guest message: nesting deeper than 32 levels"
//   // "guest message: 5000000 bytes is over the 1 MiB limit"
#pragma once

#include <fmt/format.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "smolbox/error.h"

namespace smolbox {

// The project's own documents nest six levels at most (the catalog's expect.max_count); a few
// dozen leaves room for any hand-written one and keeps every recursive walk over a parsed
// document (ours and nlohmann's dump) short.
inline constexpr int kMaxJsonDepth = 32;
// At ~100 bytes a value, 6.5 MB of parsed document at most. The catalog, the largest of our
// files, holds about 3,100.
inline constexpr size_t kMaxJsonValues = 1 << 16;

struct JsonBounds {
  size_t max_bytes = 0;
  int max_depth = kMaxJsonDepth;
  // Values, counted as nlohmann allocates them: every scalar and container.
  size_t max_values = kMaxJsonValues;
};

// Refuses text over any bound in one O(n) pass, without parsing it. what names the document
// ("spec file /x.json", "guest message") as the error's where; "" leaves that to the caller.
Expected<void> CheckJsonBounds(std::string_view text, const JsonBounds& bounds,
                               std::string_view what);

// CheckJsonBounds, then nlohmann's parser; a syntax error reads
// "what: malformed JSON at byte N: <nlohmann's reason>". callback is nlohmann's, as in
// json::parse. Never throws.
Expected<nlohmann::json> ParseBoundedJson(
    std::string_view text, const JsonBounds& bounds, std::string_view what,
    const nlohmann::json::parser_callback_t& callback = nullptr);

// A field of a peer's object, or fallback when the field is missing, of another type or out of
// range, or the document is not an object. nlohmann's value() throws on a wrong type instead,
// which would let a peer end its reader with {"type": 1}.
std::string StringOr(const nlohmann::json& object, const char* key, std::string_view fallback);
int IntOr(const nlohmann::json& object, const char* key, int fallback);

// object.at(key).get<T>() for a peer's integer, without the cast that get() makes of a float:
// undefined behaviour out of T's range, and nlohmann reads 1e43, or an integer literal beyond
// 64 bits, as a float. A float or a value out of T's range throws type_error or out_of_range,
// as at() and get() do, for the decoder's catch: this is the JSON edge.
//
//   r.cpu_ms = IntegerAt<int64_t>(h, "cpu_ms");
template <std::integral T>
T IntegerAt(const nlohmann::json& object, const char* key) {
  const nlohmann::json& value = object.at(key);
  if (!value.is_number_integer()) {
    throw nlohmann::json::type_error::create(302, fmt::format("{} must be an integer", key), &value);
  }
  bool fits = value.is_number_unsigned() ? std::in_range<T>(value.get<uint64_t>())
                                         : std::in_range<T>(value.get<int64_t>());
  if (!fits) {
    throw nlohmann::json::out_of_range::create(406, fmt::format("{} is out of range", key), &value);
  }
  return value.is_number_unsigned() ? static_cast<T>(value.get<uint64_t>())
                                    : static_cast<T>(value.get<int64_t>());
}

// nlohmann's exception without its "[json.exception.out_of_range.406] " prefix, which means
// nothing to a user: "number overflow parsing '1e999'".
std::string JsonExceptionReason(const nlohmann::json::exception& e);

// "64 MiB", "4 KiB", "100 bytes": a limit as the errors name it.
std::string FormatLimitBytes(size_t bytes);

}  // namespace smolbox
