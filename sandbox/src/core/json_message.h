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

#include <algorithm>
#include <cstdint>
#include <functional>
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

}  // namespace smolbox
