// The host <-> agent protocol, shared by every backend: length-prefixed JSON.
//
// A frame is: u32 body length, u32 JSON length, the JSON header, then an optional
// binary tail (output bytes, stdin bytes). All integers are little-endian.
//
//   host -> agent   {"type":"exec", "argv":[...], "env":{...}, "cwd":..., "limits":{...}}
//                   tail = stdin bytes
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

#include <nlohmann/json.hpp>

#include "smolbox/error.h"

namespace smolbox::channel {

// A frame larger than this is a protocol error: it bounds the reader's memory.
inline constexpr uint32_t kMaxFrameBytes = 80u << 20;

struct Message {
  nlohmann::json header;
  std::string tail;
  std::string Type() const { return header.value("type", ""); }
};

std::string Encode(const Message& message);
// Blocking write of a whole frame; retries on EINTR and short writes.
Expected<void> WriteMessage(int fd, const Message& message);
// Blocking read of one frame; an orderly EOF before a frame is std::nullopt.
Expected<std::optional<Message>> ReadMessage(int fd);

// Incremental decoder for poll loops: Feed() what read() gave, then Next() until empty.
class FrameReader {
 public:
  void Feed(const char* data, size_t size) { buffer_.append(data, size); }
  // A complete message, std::nullopt when more bytes are needed, or a protocol error.
  Expected<std::optional<Message>> Next();
  size_t Buffered() const { return buffer_.size(); }

 private:
  std::string buffer_;
};

}  // namespace smolbox::channel
