// Decoding of the messages two parts of smolbox send each other (an exec request and its
// report, a microVM's setup and restore, a control client's exec order, a run's result). Each
// is a struct whose fields nlohmann's type macros list once, for encoding and decoding:
//
//   NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(GuestRestore, realtime_sec, realtime_nsec, hostname)
//   static const MessageShape shape{GuestRestore{}};
//   auto restore = DecodeMessage<GuestRestore>(m.header, shape, "restored message");
//   // "restored message: field hostname is missing"
//   // "restored message: realtime_sec must be an integer"
//   // "restored message: realtime_sec is out of range"
//
// nlohmann alone is not enough for a peer's message: its errors name neither the message nor
// the field, its get<int>() of a float is a cast (undefined behaviour out of range), and of a
// wider integer it wraps. So the message is first checked against a shape, the encoding of a
// sample value, and only a message that fits it reaches nlohmann.
//
// A message may carry fields the shape does not name (its "type", a newer peer's): they are
// ignored. Files people write take spec.cc's strict reader instead, which refuses them.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "json_bounds.h"
#include "smolbox/error.h"

namespace smolbox {

// The fields of a message and the kind of each, from the encoding of a sample value. A list in
// the sample holds one element, which gives every element's kind; a map holds one entry under
// "", the one key that no field can have, which gives every value's. optional names the
// message's own fields that it may leave out, nullable those it may send as null.
//
// Each integer field's range is learnt once, here: a field holds the extremes that a probe
// (the sample with its integers changed) keeps through a decode and an encode. So T's
// from_json must not refuse an integer for its value alone, and a shape is built once per
// message type (a function's static), not per message.
class MessageShape {
 public:
  template <typename T>
  explicit MessageShape(const T& sample, std::vector<std::string> optional = {},
                        std::vector<std::string> nullable = {})
      : fields_(sample), optional_(std::move(optional)), nullable_(std::move(nullable)) {
    LearnRanges([](const nlohmann::json& probe) {
      try {
        return nlohmann::json(probe.get<T>());
      } catch (const nlohmann::json::exception&) {
        return nlohmann::json();
      }
    });
  }

  // Every field present (unless optional), of the kind the sample gives it and, if an integer,
  // within its field's range.
  Expected<void> Check(const nlohmann::json& message, std::string_view what) const;

 private:
  // A field's place in the message, formatted only for an error: "volumes[2].tag".
  struct Path {
    const Path* parent = nullptr;  // nullptr: a field of the message itself
    std::string_view key;          // a field's name or a map's key
    size_t index = 0;              // a list's element, when key is empty
    bool map_key = false;
    std::string ToString() const;
  };
  using RoundTrip = std::function<nlohmann::json(const nlohmann::json&)>;

  void LearnRanges(const RoundTrip& round_trip);
  static void IntegerPointers(const nlohmann::json& shape, const nlohmann::json::json_pointer& at,
                              std::vector<nlohmann::json::json_pointer>& out);
  static std::string_view Mismatch(const nlohmann::json& value, const nlohmann::json& shape);
  static bool Fits(const nlohmann::json& value, const nlohmann::json& range);
  static bool SameInteger(const nlohmann::json& a, const nlohmann::json& b);
  static bool IsMap(const nlohmann::json& shape) {
    return shape.is_object() && shape.size() == 1 && shape.begin().key().empty();
  }
  static bool Listed(const std::vector<std::string>& list, std::string_view key) {
    return std::find(list.begin(), list.end(), key) != list.end();
  }
  Expected<void> CheckValue(const nlohmann::json& value, const nlohmann::json& shape,
                            const Path& path, std::string_view what) const;
  Expected<void> CheckFields(const nlohmann::json& object, const nlohmann::json& shape,
                             const Path* parent, std::string_view what) const;

  // The sample's encoding, each integer replaced by its field's range: the lowest value for a
  // signed field (-2^31 for an int), the highest for an unsigned one (2^32 - 1 for a uint32_t).
  nlohmann::json fields_;
  std::vector<std::string> optional_;
  std::vector<std::string> nullable_;
};

// message as a T, or an error "what: <field> ..." in our words, never nlohmann's. T has
// to_json and from_json (the macros' or its own); its from_json may throw nlohmann's
// exceptions for what the shape cannot say (an unknown status name).
template <typename T>
Expected<T> DecodeMessage(const nlohmann::json& message, const MessageShape& shape,
                          std::string_view what) {
  SMOLBOX_TRY(shape.Check(message, what));
  T value;
  try {
    message.get_to(value);
  } catch (const nlohmann::json::exception& e) {
    return std::unexpected(Error{std::string(what), JsonExceptionReason(e), 0});
  }
  return value;
}

inline std::string MessageShape::Path::ToString() const {
  std::string head = parent ? parent->ToString() : "";
  if (map_key) return fmt::format("{}[{:?}]", head, key);
  if (key.empty()) return fmt::format("{}[{}]", head, index);
  return head.empty() ? std::string(key) : fmt::format("{}.{}", head, key);
}

inline void MessageShape::IntegerPointers(const nlohmann::json& shape,
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
inline void MessageShape::LearnRanges(const RoundTrip& round_trip) {
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
inline bool MessageShape::SameInteger(const nlohmann::json& a, const nlohmann::json& b) {
  auto split = [](const nlohmann::json& v) -> std::pair<bool, uint64_t> {
    if (v.is_number_unsigned()) return {false, v.get<uint64_t>()};
    auto i = v.get<int64_t>();
    return {i < 0, static_cast<uint64_t>(i)};
  };
  return split(a) == split(b);
}

inline bool MessageShape::Fits(const nlohmann::json& value, const nlohmann::json& range) {
  bool negative = !value.is_number_unsigned() && value.get<int64_t>() < 0;
  if (range.is_number_unsigned()) {
    return !negative && value.get<uint64_t>() <= range.get<uint64_t>();
  }
  auto lowest = range.get<int64_t>();
  if (negative) return value.get<int64_t>() >= lowest;
  return value.get<uint64_t>() <= static_cast<uint64_t>(-(lowest + 1));
}

// "" when value has the kind of shape, else the kind it must have.
inline std::string_view MessageShape::Mismatch(const nlohmann::json& value,
                                               const nlohmann::json& shape) {
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

inline Expected<void> MessageShape::CheckValue(const nlohmann::json& value,
                                               const nlohmann::json& shape, const Path& path,
                                               std::string_view what) const {
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
inline Expected<void> MessageShape::CheckFields(const nlohmann::json& object,
                                                const nlohmann::json& shape, const Path* parent,
                                                std::string_view what) const {
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

inline Expected<void> MessageShape::Check(const nlohmann::json& message,
                                          std::string_view what) const {
  if (!message.is_object()) return std::unexpected(Error{std::string(what), "is not an object", 0});
  return CheckFields(message, fields_, nullptr, what);
}

}  // namespace smolbox
