#include "json_bounds.h"

#include <fmt/format.h>

#include <cstdint>
#include <limits>

namespace smolbox {
namespace {

std::unexpected<Error> Refuse(std::string_view what, std::string reason) {
  return std::unexpected(Error{std::string(what), std::move(reason), 0});
}

// "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error ..." keeps
// only "syntax error ...": the byte offset is reported separately.
std::string ParseErrorReason(const nlohmann::json::parse_error& e) {
  std::string_view reason = e.what();
  if (size_t bracket = reason.find("] "); bracket != std::string_view::npos) {
    reason.remove_prefix(bracket + 2);
  }
  if (size_t colon = reason.find(": "); colon != std::string_view::npos) {
    reason.remove_prefix(colon + 2);
  }
  return std::string(reason);
}

}  // namespace

std::string JsonExceptionReason(const nlohmann::json::exception& e) {
  std::string_view reason = e.what();
  if (size_t bracket = reason.find("] "); bracket != std::string_view::npos) {
    reason.remove_prefix(bracket + 2);
  }
  return std::string(reason);
}

std::string StringOr(const nlohmann::json& object, const char* key, std::string_view fallback) {
  if (!object.is_object()) return std::string(fallback);
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return std::string(fallback);
  return it->get<std::string>();
}

int IntOr(const nlohmann::json& object, const char* key, int fallback) {
  if (!object.is_object()) return fallback;
  auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer()) return fallback;
  using Limits = std::numeric_limits<int>;
  // Read as int64_t, an unsigned above INT64_MAX would wrap into range.
  if (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t{Limits::max()}) return fallback;
  auto value = it->get<int64_t>();
  return value >= Limits::min() && value <= Limits::max() ? static_cast<int>(value) : fallback;
}

std::string FormatLimitBytes(size_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} bytes", bytes);
}

Expected<void> CheckJsonBounds(std::string_view text, const JsonBounds& bounds,
                               std::string_view what) {
  if (text.size() > bounds.max_bytes) {
    return Refuse(what, fmt::format("{} bytes is over the {} limit", text.size(),
                                    FormatLimitBytes(bounds.max_bytes)));
  }
  // The lexer's view of strings is all it takes: outside them, each [ or { opens a level and
  // a value, and each comma starts one more value. Up to nlohmann's first syntax error, this
  // count and its parser agree, so it never sees a deeper or larger document than counted
  // here.
  long depth = 0;
  size_t values = text.empty() ? 0 : 1;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, a quote or not, is text
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > bounds.max_depth) {
        return Refuse(what, fmt::format("nesting deeper than {} levels", bounds.max_depth));
      }
      ++values;
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == ',') {
      ++values;
    }
    if (values > bounds.max_values) {
      return Refuse(what, fmt::format("more than {} values", bounds.max_values));
    }
  }
  return {};
}

Expected<nlohmann::json> ParseBoundedJson(std::string_view text, const JsonBounds& bounds,
                                          std::string_view what,
                                          const nlohmann::json::parser_callback_t& callback) {
  SMOLBOX_TRY(CheckJsonBounds(text, bounds, what));
  // JSON parsing is one of the edges where exceptions are allowed; they stop here.
  try {
    return nlohmann::json::parse(text.begin(), text.end(), callback);
  } catch (const nlohmann::json::parse_error& e) {
    return Refuse(what, fmt::format("malformed JSON at byte {}: {}", e.byte, ParseErrorReason(e)));
  } catch (const nlohmann::json::exception& e) {
    // A number beyond a double's range is out_of_range.406, not a parse_error.
    return Refuse(what, fmt::format("malformed JSON: {}", JsonExceptionReason(e)));
  }
}

}  // namespace smolbox
