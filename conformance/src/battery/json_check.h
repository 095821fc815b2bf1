// Strict reading of the hand-written JSON files (the catalog and the profiles): every key is
// checked against the keys its section allows and every value against its type. Errors name the
// field by its path ("expect.status[1]"); callers put the case or profile in front with Within.
//
//   auto keys = CheckKeys(value, "expect", {"status", "max_wall_ms"});
//   if (!keys) return std::unexpected(Within("catalog: case \"x\"", keys.error()));
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "json_bounds.h"
#include "smolbox/error.h"

namespace smolvm_check {

using smolbox::Error;
using smolbox::Expected;

// Parses without throwing, within bounds (smolbox's json_bounds.h); a syntax error reads
// "malformed JSON at byte N: reason".
Expected<nlohmann::json> ParseJsonText(const std::string& text, const smolbox::JsonBounds& bounds);
// The whole file, refused when it is over max_bytes; an unreadable file is an error carrying
// errno.
Expected<std::string> ReadTextFile(const std::string& path, size_t max_bytes);

// "path.key", or "key" at the top level.
std::string FieldPath(std::string_view path, std::string_view key);
// "path[i]".
std::string IndexPath(std::string_view path, size_t index);
// The error with prefix in front of the field it names.
Error Within(const std::string& prefix, Error error);

// An object whose keys all appear in allowed; otherwise `path: unknown field "k"`.
Expected<void> CheckKeys(const nlohmann::json& value, const std::string& path,
                         std::initializer_list<std::string_view> allowed);
Expected<std::string> GetString(const nlohmann::json& value, const std::string& path);
Expected<int64_t> GetInteger(const nlohmann::json& value, const std::string& path);
Expected<bool> GetBool(const nlohmann::json& value, const std::string& path);
Expected<std::vector<std::string>> GetStringArray(const nlohmann::json& value,
                                                  const std::string& path);
Expected<std::map<std::string, std::string>> GetStringMap(const nlohmann::json& value,
                                                          const std::string& path);

}  // namespace smolvm_check
