// Raw bytes on the agent channel, as a hostile guest or agent may send them, fed to the
// reader in chunks of varying size. Whatever decodes must encode and decode to itself.
#include "fuzz_input.h"

using smolbox::channel::FrameReader;
using smolbox::channel::Message;

namespace {

void CheckRoundTrip(const Message& message) {
  std::string frame = smolbox::channel::Encode(message);
  FrameReader again;
  again.Feed(frame.data(), frame.size());
  auto decoded = again.Next();
  smolbox::fuzz::Require(decoded && *decoded, "an encoded message decodes");
  smolbox::fuzz::Require((*decoded)->header == message.header, "the header survives a round trip");
  smolbox::fuzz::Require((*decoded)->tail == message.tail, "the tail survives a round trip");
  (void)message.Type();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the chunk size, so frames arrive split anywhere.
  size_t chunk = data[0] % 64 + 1;
  std::string_view bytes = smolbox::fuzz::AsText(data + 1, size - 1);
  FrameReader reader("fuzz message");
  for (size_t offset = 0; offset < bytes.size(); offset += chunk) {
    std::string_view piece = bytes.substr(offset, chunk);
    reader.Feed(piece.data(), piece.size());
    for (;;) {
      auto message = reader.Next();
      if (!message) return 0;  // a protocol error ends the connection
      if (!*message) break;
      CheckRoundTrip(**message);
    }
  }
  return 0;
}
