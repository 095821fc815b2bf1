#include "first_bytes.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>

namespace smolbox::net {
namespace {

// A cursor over bytes that fails, rather than reads past the end.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool Skip(size_t n) {
    if (n > data_.size() - at_) return false;
    at_ += n;
    return true;
  }
  std::optional<uint32_t> Uint(size_t bytes) {
    if (bytes > data_.size() - at_) return std::nullopt;
    uint32_t value = 0;
    for (size_t i = 0; i < bytes; ++i) value = (value << 8) | static_cast<uint8_t>(data_[at_ + i]);
    at_ += bytes;
    return value;
  }
  // The next n bytes as a reader of their own.
  std::optional<Reader> Sub(size_t n) {
    if (n > data_.size() - at_) return std::nullopt;
    Reader sub(data_.substr(at_, n));
    at_ += n;
    return sub;
  }
  // A block prefixed with its length in bytes bytes.
  std::optional<Reader> Block(size_t bytes) {
    auto n = Uint(bytes);
    if (!n) return std::nullopt;
    return Sub(*n);
  }
  bool AtEnd() const { return at_ == data_.size(); }
  std::string_view Rest() const { return data_.substr(at_); }

 private:
  std::string_view data_;
  size_t at_ = 0;
};

FirstBytesName None(const char* protocol, std::string why) {
  return FirstBytesName{FirstBytesName::kNone, protocol, {}, std::move(why)};
}

// A host name as DNS spells one: letters, digits, '-', '_' and dots. Anything else (a NUL, a
// space, a byte past ASCII) is no name at all, never one to match leniently.
std::optional<std::string> HostName(std::string_view text) {
  if (text.empty() || text.size() > 253) return std::nullopt;
  std::string out;
  for (unsigned char c : text) {
    if (!std::isalnum(c) && c != '-' && c != '_' && c != '.') return std::nullopt;
    out += static_cast<char>(std::tolower(c));
  }
  if (out.back() == '.') out.pop_back();
  return out;
}

FirstBytesName ServerNameExtension(Reader extension) {
  auto list = extension.Block(2);
  if (!list) return None("tls", "a malformed server_name extension");
  while (!list->AtEnd()) {
    auto type = list->Uint(1);
    auto name = list->Block(2);
    if (!type || !name) return None("tls", "a malformed server_name extension");
    if (*type != 0) continue;  // host_name is the only type there is
    auto host = HostName(name->Rest());
    if (!host) return None("tls", "a server name that is not a host name");
    return FirstBytesName{FirstBytesName::kFound, "tls", {*host}, ""};
  }
  return None("tls", "no host_name in the server_name extension");
}

FirstBytesName ClientHello(Reader hello) {
  // client_version, random, then the session id, cipher suites and compression methods.
  if (!hello.Skip(2 + 32) || !hello.Block(1) || !hello.Block(2) || !hello.Block(1)) {
    return None("tls", "a malformed ClientHello");
  }
  if (hello.AtEnd()) return None("tls", "a ClientHello without a server name (SNI)");
  auto extensions = hello.Block(2);
  if (!extensions) return None("tls", "a malformed ClientHello");
  while (!extensions->AtEnd()) {
    auto type = extensions->Uint(2);
    auto body = extensions->Block(2);
    if (!type || !body) return None("tls", "a malformed ClientHello extension");
    if (*type == 0) return ServerNameExtension(*body);
  }
  return None("tls", "a ClientHello without a server name (SNI)");
}

FirstBytesName Tls(std::string_view data) {
  Reader record(data);
  if (data.size() < 5) return {};
  record.Skip(3);  // content type, version
  uint32_t length = *record.Uint(2);
  auto body = record.Sub(length);
  if (!body) {
    if (5 + length > kMaxFirstBytes) return None("tls", "a TLS record larger than any ClientHello");
    return {};
  }
  auto type = body->Uint(1);
  auto hello = body->Block(3);
  if (!type || *type != 1) return None("tls", "a TLS record that is not a ClientHello");
  // A ClientHello longer than its first record would need the next one; none that a client
  // sends today is.
  if (!hello) return None("tls", "a ClientHello split across TLS records");
  return ClientHello(*hello);
}

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// "name", "name:port", "[v6]:port" -> the host; an IP literal stays as it is and matches no
// --allow-host.
std::optional<std::string> AuthorityHost(std::string_view authority) {
  if (authority.starts_with('[')) return std::nullopt;
  if (size_t colon = authority.rfind(':'); colon != std::string_view::npos)
    authority = authority.substr(0, colon);
  return HostName(authority);
}

// The host of an absolute-form target ("http://name/path"), which a server may prefer over
// the Host header, so it must pass too.
std::optional<std::optional<std::string>> TargetHost(std::string_view target) {
  std::string lower = Lower(target.substr(0, 8));
  size_t scheme = lower.starts_with("http://") ? 7 : lower.starts_with("https://") ? 8 : 0;
  if (scheme == 0) return std::nullopt;
  std::string_view rest = target.substr(scheme);
  return AuthorityHost(rest.substr(0, rest.find_first_of("/?#")));
}

FirstBytesName Http(std::string_view data) {
  size_t end = data.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    if (data.size() >= kMaxFirstBytes) return None("http", "no end of the request's headers");
    return {};
  }
  std::string_view head = data.substr(0, end + 2);
  size_t line_end = head.find("\r\n");
  std::string_view request = head.substr(0, line_end);
  size_t sp1 = request.find(' '), sp2 = request.rfind(' ');
  if (sp1 == std::string_view::npos || sp1 == sp2 ||
      !request.substr(sp2 + 1).starts_with("HTTP/1.")) {
    return None("http", "neither a TLS ClientHello nor an HTTP/1 request");
  }
  FirstBytesName found{FirstBytesName::kFound, "http", {}, ""};
  if (auto target = TargetHost(request.substr(sp1 + 1, sp2 - sp1 - 1))) {
    if (!*target) return None("http", "a request target whose host is not a host name");
    found.names.push_back(**target);
  }
  int hosts = 0;
  for (size_t at = line_end + 2; at < head.size();) {
    size_t next = head.find("\r\n", at);
    std::string_view line = head.substr(at, next - at);
    at = next + 2;
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || Lower(line.substr(0, colon)) != "host") continue;
    auto host = AuthorityHost(Trim(line.substr(colon + 1)));
    if (!host) return None("http", "a Host header that is not a host name");
    found.names.push_back(*host);
    ++hosts;
  }
  if (hosts != 1)
    return None("http", hosts == 0 ? "a request without a Host header"
                                   : "a request with several Host headers");
  return found;
}

}  // namespace

FirstBytesName FindFirstBytesName(std::string_view data) {
  if (data.empty()) return {};
  if (static_cast<uint8_t>(data[0]) == 0x16) return Tls(data);
  return Http(data);
}

}  // namespace smolbox::net
