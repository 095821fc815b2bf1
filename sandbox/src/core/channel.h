// The host <-> agent protocol, shared by every backend: length-prefixed JSON.
//
// A frame is: u32 body length, u32 JSON length, the JSON header, then an optional
// binary tail (output bytes, stdin bytes). All integers are little-endian.
//
//   host -> agent   {"type":"exec", "argv":[...], "env":{...}, "cwd":..., "limits":{...}}
//                   {"type":"stdin"}                     tail = bytes
//   agent -> host   {"type":"ready"}
//                   {"type":"output", "fd":1}            tail = bytes
//                   {"type":"exit", "status":"exited", "exit_code":0, ...}
//
//   smolbox::channel::Message m{{{"type", "ready"}}, ""};
//   if (auto ok = smolbox::channel::WriteMessage(fd, m); !ok) ...
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "smolbox/error.h"

namespace smolbox::channel {

// A frame larger than this is a protocol error: it bounds the reader's memory.
inline constexpr uint32_t kMaxFrameBytes = 80u << 20;
// So is a JSON header larger than this, or one over json_bounds.h's depth, or with more than
// kMaxHeaderValues values: the header is parsed, the tail only copied. The largest header is an
// exec's argv and env, which execve caps at a quarter of the stack rlimit (2 MiB under the
// default 8 MiB); 16 MiB holds them even with every byte escaped ("\u0001" is six), while a
// hostile peer's header costs at most about 40 MB to parse.
inline constexpr uint32_t kMaxHeaderBytes = 16u << 20;
// execve's 2 MiB hold at most 233,000 argv and env strings (a pointer and a NUL each).
inline constexpr size_t kMaxHeaderValues = 1 << 18;

struct Message {
  nlohmann::json header;
  std::string tail;
  // "" when the header has no string "type": a peer's header may hold anything.
  std::string Type() const;
};

std::string Encode(const Message& message);
// Blocking write of a whole frame; retries on EINTR and short writes.
Expected<void> WriteMessage(int fd, const Message& message);
// Blocking read of one frame; an orderly EOF before a frame is std::nullopt. what names the
// message in errors ("agent message: nesting deeper than 32 levels").
Expected<std::optional<Message>> ReadMessage(int fd, std::string_view what = "channel message");

// Incremental decoder for poll loops: Feed() what read() gave, then Next() until empty.
class FrameReader {
 public:
  explicit FrameReader(std::string what = "channel message") : what_(std::move(what)) {}
  void Feed(const char* data, size_t size) { buffer_.append(data, size); }
  // A complete message, std::nullopt when more bytes are needed, or a protocol error.
  Expected<std::optional<Message>> Next();
  size_t Buffered() const { return buffer_.size(); }

 private:
  std::string what_;
  std::string buffer_;
};

}  // namespace smolbox::channel
