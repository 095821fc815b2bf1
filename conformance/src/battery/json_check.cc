#include "battery/json_check.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <limits>

namespace smolvm_check {
namespace {

using nlohmann::json;

std::unexpected<Error> Fail(std::string field, std::string reason) {
  return std::unexpected(Error::Field(std::move(field), std::move(reason)));
}

}  // namespace

Expected<json> ParseJsonText(const std::string& text, const smolbox::JsonBounds& bounds) {
  return smolbox::ParseBoundedJson(text, bounds, "");
}

Expected<std::string> ReadTextFile(const std::string& path, size_t max_bytes) {
  std::FILE* file = std::fopen(path.c_str(), "rbe");
  if (file == nullptr) return std::unexpected(Error{"", "cannot open " + path, errno});
  std::string text;
  char buffer[1 << 16];
  size_t n = 0;
  // One buffer past the limit tells a file over it from one at it; /dev/zero ends there too.
  while (text.size() <= max_bytes && (n = std::fread(buffer, 1, sizeof buffer, file)) > 0) {
    text.append(buffer, n);
  }
  int err = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (err != 0) return std::unexpected(Error{"", "cannot read " + path, err});
  if (text.size() > max_bytes) {
    return Fail("", fmt::format("{} is over the {} limit", path, smolbox::FormatLimitBytes(max_bytes)));
  }
  return text;
}

std::string FieldPath(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

std::string IndexPath(std::string_view path, size_t index) {
  return fmt::format("{}[{}]", path, index);
}

Error Within(const std::string& prefix, Error error) {
  error.where = error.where.empty() ? prefix : prefix + ": " + error.where;
  return error;
}

Expected<void> CheckKeys(const json& value, const std::string& path,
                         std::initializer_list<std::string_view> allowed) {
  if (!value.is_object()) return Fail(path, "must be an object");
  for (const auto& [key, unused] : value.items()) {
    bool known = false;
    for (std::string_view name : allowed) known = known || name == key;
    if (!known) return Fail(path, fmt::format("unknown field {:?}", key));
  }
  return {};
}

Expected<std::string> GetString(const json& value, const std::string& path) {
  if (!value.is_string()) return Fail(path, "must be a string");
  return value.get<std::string>();
}

Expected<int64_t> GetInteger(const json& value, const std::string& path) {
  if (value.is_number_unsigned() &&
      value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Fail(path, "is out of range");
  }
  if (!value.is_number_integer()) return Fail(path, "must be an integer");
  return value.get<int64_t>();
}

Expected<bool> GetBool(const json& value, const std::string& path) {
  if (!value.is_boolean()) return Fail(path, "must be true or false");
  return value.get<bool>();
}

Expected<std::vector<std::string>> GetStringArray(const json& value, const std::string& path) {
  if (!value.is_array()) return Fail(path, "must be an array of strings");
  std::vector<std::string> out;
  for (size_t i = 0; i < value.size(); ++i) {
    SMOLBOX_ASSIGN_OR_RETURN(auto text, GetString(value[i], IndexPath(path, i)));
    out.push_back(std::move(text));
  }
  return out;
}

Expected<std::map<std::string, std::string>> GetStringMap(const json& value,
                                                          const std::string& path) {
  if (!value.is_object()) return Fail(path, "must be an object of strings");
  std::map<std::string, std::string> out;
  for (const auto& [key, item] : value.items()) {
    SMOLBOX_ASSIGN_OR_RETURN(auto text, GetString(item, FieldPath(path, key)));
    out.emplace(key, std::move(text));
  }
  return out;
}

}  // namespace smolvm_check
