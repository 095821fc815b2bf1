// The name a connection's first bytes carry: the server name (SNI) of a TLS ClientHello, or the
// Host of an HTTP/1 request. The gateway checks it against --allow-host, so that an allowed
// address cannot front another name on the same server.
//
//   FirstBytesName seen = FindFirstBytesName(buffered);
//   if (seen.state == FirstBytesName::kNeedMore) read more, up to kMaxFirstBytes;
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace smolbox::net {

// The most the gateway reads before it must have seen the name: one TLS record, or the
// request line and headers of an HTTP request.
inline constexpr size_t kMaxFirstBytes = 16 * 1024 + 5;

struct FirstBytesName {
  enum State { kNeedMore, kFound, kNone } state = kNeedMore;
  const char* protocol = "";       // "tls" or "http"
  std::vector<std::string> names;  // kFound: every name the request gives, lower case
  std::string why;                 // kNone: what is missing or malformed
};

// Judges what has been read so far; kNeedMore until a whole ClientHello record, or a request's
// headers up to the blank line, are there.
FirstBytesName FindFirstBytesName(std::string_view data);

}  // namespace smolbox::net
