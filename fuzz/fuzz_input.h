// What the fuzz targets share: the input as text, as channel messages, and a check that ends
// the run as a crash (so libFuzzer keeps the input) when a property fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "channel.h"

namespace smolbox::fuzz {

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

inline void Require(bool holds, const char* property) {
  if (holds) return;
  std::fprintf(stderr, "fuzz: property failed: %s\n", property);
  std::abort();
}

inline void PutU32(std::string& out, size_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// One frame as a peer would send it: the header up to the first NUL, the tail after it. Seeds
// stay readable text that way; the channel's framing is the channel target's to fuzz.
inline std::string AsFrame(std::string_view input) {
  size_t nul = input.find('\0');
  std::string_view header = input.substr(0, nul);
  std::string_view tail = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  std::string frame;
  PutU32(frame, 4 + header.size() + tail.size());
  PutU32(frame, header.size());
  frame.append(header);
  frame.append(tail);
  return frame;
}

// The frame decoded by the channel's own reader, bounds and all; nullopt when it refuses it.
inline std::optional<channel::Message> AsMessage(std::string_view input) {
  std::string frame = AsFrame(input);
  channel::FrameReader reader("fuzz message");
  reader.Feed(frame.data(), frame.size());
  auto message = reader.Next();
  if (!message || !*message) return std::nullopt;
  return std::move(**message);
}

// One frame per line ("header" or "header\0tail"), for a conversation of several messages.
inline std::string AsFrames(std::string_view input) {
  std::string frames;
  while (!input.empty()) {
    size_t newline = input.find('\n');
    frames += AsFrame(input.substr(0, newline));
    input.remove_prefix(newline == std::string_view::npos ? input.size() : newline + 1);
  }
  return frames;
}

}  // namespace smolbox::fuzz
