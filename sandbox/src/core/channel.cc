#include "channel.h"

#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "json_bounds.h"

namespace smolbox::channel {
namespace {

void PutU32(std::string& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint32_t GetU32(const char* in) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= static_cast<uint32_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  return value;
}

Error OverLimit(std::string_view what, size_t frame_bytes) {
  return Error{std::string(what),
               fmt::format("a {} byte frame is over the {} limit", frame_bytes, FormatLimitBytes(kMaxFrameBytes)), 0};
}

Expected<void> WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::unexpected(Error::Sys("channel write"));
    data += n;
    size -= static_cast<size_t>(n);
  }
  return {};
}

// Reads exactly size bytes; false on EOF before the first byte.
Expected<bool> ReadExactly(int fd, char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = read(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::unexpected(Error::Sys("channel read"));
    if (n == 0) {
      if (done == 0) return false;
      return std::unexpected(Error{"channel read", "peer closed mid-frame", 0});
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

Expected<Message> DecodeBody(const char* body, uint32_t body_len, std::string_view what) {
  if (body_len < 4) return std::unexpected(Error{std::string(what), "frame too short", 0});
  uint32_t json_len = GetU32(body);
  if (json_len > body_len - 4) return std::unexpected(Error{std::string(what), "bad JSON length", 0});
  const JsonBounds bounds{.max_bytes = kMaxHeaderBytes, .max_values = kMaxHeaderValues};
  auto header = ParseBoundedJson(std::string_view(body + 4, json_len), bounds, what);
  SMOLBOX_TRY(header);
  if (!header->is_object()) return std::unexpected(Error{std::string(what), "header is not a JSON object", 0});
  Message message;
  message.header = std::move(*header);
  message.tail.assign(body + 4 + json_len, body_len - 4 - json_len);
  return message;
}

}  // namespace

std::string Message::Type() const { return StringOr(header, "type", ""); }

std::string Encode(const Message& message) {
  std::string json = message.header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string frame;
  frame.reserve(8 + json.size() + message.tail.size());
  PutU32(frame, static_cast<uint32_t>(4 + json.size() + message.tail.size()));
  PutU32(frame, static_cast<uint32_t>(json.size()));
  frame += json;
  frame += message.tail;
  return frame;
}

Expected<void> WriteMessage(int fd, const Message& message) {
  std::string frame = Encode(message);
  if (frame.size() - 4 > kMaxFrameBytes) return std::unexpected(OverLimit("channel write", frame.size() - 4));
  // Refused here, where the error reaches whoever made the message, not only its reader.
  if (uint32_t json_len = GetU32(frame.data() + 4); json_len > kMaxHeaderBytes) {
    return std::unexpected(Error{"channel write", fmt::format("a {} byte header is over the {} limit", json_len,
                                                              FormatLimitBytes(kMaxHeaderBytes)), 0});
  }
  return WriteAll(fd, frame.data(), frame.size());
}

Expected<std::optional<Message>> ReadMessage(int fd, std::string_view what) {
  char prefix[4];
  SMOLBOX_ASSIGN_OR_RETURN(auto got, ReadExactly(fd, prefix, sizeof prefix));
  if (!got) return std::nullopt;
  uint32_t body_len = GetU32(prefix);
  if (body_len > kMaxFrameBytes) return std::unexpected(OverLimit(what, body_len));
  std::string body(body_len, '\0');
  SMOLBOX_ASSIGN_OR_RETURN(auto body_got, ReadExactly(fd, body.data(), body_len));
  if (!body_got && body_len > 0) {
    return std::unexpected(Error{"channel read", "peer closed mid-frame", 0});
  }
  SMOLBOX_ASSIGN_OR_RETURN(auto message, DecodeBody(body.data(), body_len, what));
  return std::optional<Message>(std::move(message));
}

Expected<std::optional<Message>> FrameReader::Next() {
  if (buffer_.size() < 4) return std::nullopt;
  uint32_t body_len = GetU32(buffer_.data());
  if (body_len > kMaxFrameBytes) return std::unexpected(OverLimit(what_, body_len));
  if (buffer_.size() < 4 + static_cast<size_t>(body_len)) return std::nullopt;
  auto message = DecodeBody(buffer_.data() + 4, body_len, what_);
  buffer_.erase(0, 4 + static_cast<size_t>(body_len));
  SMOLBOX_TRY(message);
  return std::optional<Message>(std::move(*message));
}

}  // namespace smolbox::channel
