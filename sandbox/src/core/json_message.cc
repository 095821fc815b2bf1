#include "json_message.h"

#include <fmt/format.h>

#include <cmath>
#include <iterator>
#include <limits>

namespace smolbox {

std::string MessageShape::Path::ToString() const {
  std::string head = parent ? parent->ToString() : "";
  if (map_key) return fmt::format("{}[{:?}]", head, key);
  if (key.empty()) return fmt::format("{}[{}]", head, index);
  return head.empty() ? std::string(key) : fmt::format("{}.{}", head, key);
}

void MessageShape::IntegerPointers(const nlohmann::json& shape,
                                   const nlohmann::json::json_pointer& at,
                                   std::vector<nlohmann::json::json_pointer>& out) {
  if (shape.is_number_integer()) out.push_back(at);
  if (shape.is_array() && !shape.empty()) IntegerPointers(shape[0], at / 0, out);
  if (shape.is_object()) {
    for (auto it = shape.begin(); it != shape.end(); ++it) IntegerPointers(*it, at / it.key(), out);
  }
}

// The widest of the standard integer types' extremes that each field keeps: whether it keeps
// -1 (signed), then each candidate, narrowest last. One probe sets every field still unknown,
// which costs a few round trips per message type rather than a few per field.
void MessageShape::LearnRanges(const RoundTrip& round_trip) {
  struct Field {
    nlohmann::json::json_pointer at;
    bool is_signed = false;
  };
  std::vector<nlohmann::json::json_pointer> integers;
  IntegerPointers(fields_, nlohmann::json::json_pointer(), integers);
  std::vector<Field> unknown;
  for (auto& at : integers) unknown.push_back(Field{std::move(at)});
  const nlohmann::json sample = fields_;
  auto kept = [&](const auto& value_of) {
    nlohmann::json probe = sample;
    for (const Field& f : unknown) probe[f.at] = value_of(f);
    const nlohmann::json back = round_trip(probe);
    std::vector<bool> out;
    for (const Field& f : unknown) {
      out.push_back(back.contains(f.at) && back[f.at].is_number_integer() &&
                    SameInteger(back[f.at], probe[f.at]));
    }
    return out;
  };
  auto is_signed = kept([](const Field&) { return nlohmann::json(-1); });
  for (size_t i = 0; i < unknown.size(); ++i) unknown[i].is_signed = is_signed[i];
  using std::numeric_limits;
  const int64_t lowest[] = {numeric_limits<int64_t>::min(), numeric_limits<int32_t>::min(),
                            numeric_limits<int16_t>::min(), numeric_limits<int8_t>::min()};
  const uint64_t highest[] = {numeric_limits<uint64_t>::max(), numeric_limits<uint32_t>::max(),
                              numeric_limits<uint16_t>::max(), numeric_limits<uint8_t>::max()};
  for (size_t k = 0; k < std::size(lowest) && !unknown.empty(); ++k) {
    auto extreme = [&](const Field& f) {
      return f.is_signed ? nlohmann::json(lowest[k]) : nlohmann::json(highest[k]);
    };
    auto keeps = kept(extreme);
    std::vector<Field> still_unknown;
    for (size_t i = 0; i < unknown.size(); ++i) {
      if (keeps[i]) {
        fields_[unknown[i].at] = extreme(unknown[i]);
      } else {
        still_unknown.push_back(unknown[i]);
      }
    }
    unknown = std::move(still_unknown);
  }
  for (const Field& f : unknown) fields_[f.at] = uint64_t{0};  // no standard type: only 0 fits
}

// nlohmann's == casts an unsigned to a signed integer: 2^64 - 1 would equal -1.
bool MessageShape::SameInteger(const nlohmann::json& a, const nlohmann::json& b) {
  auto split = [](const nlohmann::json& v) -> std::pair<bool, uint64_t> {
    if (v.is_number_unsigned()) return {false, v.get<uint64_t>()};
    auto i = v.get<int64_t>();
    return {i < 0, static_cast<uint64_t>(i)};
  };
  return split(a) == split(b);
}

bool MessageShape::Fits(const nlohmann::json& value, const nlohmann::json& range) {
  bool negative = !value.is_number_unsigned() && value.get<int64_t>() < 0;
  if (range.is_number_unsigned()) {
    return !negative && value.get<uint64_t>() <= range.get<uint64_t>();
  }
  auto lowest = range.get<int64_t>();
  if (negative) return value.get<int64_t>() >= lowest;
  return value.get<uint64_t>() <= static_cast<uint64_t>(-(lowest + 1));
}

// "" when value has the kind of shape, else the kind it must have.
std::string_view MessageShape::Mismatch(const nlohmann::json& value, const nlohmann::json& shape) {
  using Kind = nlohmann::json::value_t;
  switch (shape.type()) {
    case Kind::string:
      return value.is_string() ? "" : "a string";
    case Kind::boolean:
      return value.is_boolean() ? "" : "a bool";
    case Kind::number_integer:
    case Kind::number_unsigned:
      return value.is_number_integer() ? "" : "an integer";
    case Kind::number_float:
      // A parsed message holds no infinity or NaN; one built in memory might.
      return value.is_number() && std::isfinite(value.get<double>()) ? "" : "a finite number";
    case Kind::array:
      return value.is_array() ? "" : "a list";
    case Kind::object:
      return value.is_object() ? "" : "an object";
    default:
      return value.is_null() ? "" : "null";
  }
}

Expected<void> MessageShape::CheckValue(const nlohmann::json& value, const nlohmann::json& shape,
                                        const Path& path, std::string_view what) const {
  if (auto kind = Mismatch(value, shape); !kind.empty()) {
    return std::unexpected(
        Error{std::string(what), fmt::format("{} must be {}", path.ToString(), kind), 0});
  }
  if (shape.is_number_integer() && !Fits(value, shape)) {
    return std::unexpected(
        Error{std::string(what), fmt::format("{} is out of range", path.ToString()), 0});
  }
  if (shape.is_array() && !shape.empty()) {
    for (size_t i = 0; i < value.size(); ++i) {
      SMOLBOX_TRY(CheckValue(value[i], shape[0], Path{&path, "", i}, what));
    }
  } else if (IsMap(shape)) {
    for (auto it = value.begin(); it != value.end(); ++it) {
      SMOLBOX_TRY(CheckValue(*it, shape.front(), Path{&path, it.key(), 0, true}, what));
    }
  } else if (shape.is_object()) {
    return CheckFields(value, shape, &path, what);
  }
  return {};
}

// Both objects are maps sorted by key, so one pass over each finds every field.
Expected<void> MessageShape::CheckFields(const nlohmann::json& object, const nlohmann::json& shape,
                                         const Path* parent, std::string_view what) const {
  auto it = object.begin();
  for (auto field = shape.begin(); field != shape.end(); ++field) {
    const std::string& key = field.key();
    while (it != object.end() && it.key() < key) ++it;
    Path path{parent, key};
    // Only the message's own fields may be optional or nullable.
    if (it == object.end() || it.key() != key) {
      if (!parent && Listed(optional_, key)) continue;
      return std::unexpected(
          Error{std::string(what), fmt::format("field {} is missing", path.ToString()), 0});
    }
    if (!parent && it->is_null() && Listed(nullable_, key)) continue;
    SMOLBOX_TRY(CheckValue(*it, *field, path, what));
  }
  return {};
}

Expected<void> MessageShape::Check(const nlohmann::json& message, std::string_view what) const {
  if (!message.is_object()) return std::unexpected(Error{std::string(what), "is not an object", 0});
  return CheckFields(message, fields_, nullptr, what);
}

}  // namespace smolbox
