// Where `smolbox serve` listens: --listen unix:PATH or tcp:HOST:PORT.
#pragma once

#include <string>

#include "smolbox/error.h"

namespace smolbox::api {

struct ListenAddress {
  enum class Kind { kUnix, kTcp };
  Kind kind = Kind::kUnix;
  std::string path;  // unix
  std::string host;  // tcp: an IPv4 or IPv6 literal, or localhost
  int port = 0;      // tcp: 0 picks a free port, which the server prints
  // "unix:/run/smolbox/api.sock", "tcp:127.0.0.1:8080", "tcp:[::1]:8080".
  std::string ToString() const;
};

// Errors name --listen and say what is wrong with the text.
Expected<ListenAddress> ParseListenAddress(const std::string& text);

// A tcp address reachable only from this host: 127.0.0.0/8, ::1 or localhost. Anything else
// needs TLS, so that the bearer token never crosses a network in the clear.
bool IsLoopback(const ListenAddress& address);

}  // namespace smolbox::api
