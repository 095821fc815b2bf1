// The parsers of egress_policy.h: addresses, CIDRs, host rules and resolver addresses as users
// write them in flags and spec files. Strict: whatever they cannot read is an error that names
// the field and quotes the text, never a rule skipped.
#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string>

#include "smolbox/egress_policy.h"

namespace smolbox {
namespace {

constexpr size_t kMaxNameBytes = 253;  // RFC 1035, written without the root's dot
constexpr size_t kMaxLabelBytes = 63;

std::unexpected<Error> Invalid(std::string_view field, std::string_view text,
                               std::string_view why) {
  return std::unexpected(Error::Field(std::string(field), fmt::format("{:?}: {}", text, why)));
}

// A decimal with no sign, leading "+" or spaces, from 0 to max; nothing on failure.
std::optional<unsigned> Decimal(std::string_view text, unsigned max) {
  if (text.empty() || text.size() > 5 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  unsigned value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  if (value > max) return std::nullopt;
  return value;
}

Expected<uint16_t> ParsePort(std::string_view port, std::string_view text, std::string_view field) {
  if (port.empty()) return Invalid(field, text, "the port is empty");
  auto value = Decimal(port, 65535);
  if (!value) {
    return Invalid(field, text, fmt::format("the port {:?} is not a number from 1 to 65535", port));
  }
  if (*value == 0) {
    return Invalid(field, text, "port 0 is not a port: ports are 1 to 65535");
  }
  return static_cast<uint16_t>(*value);
}

bool LabelCharacter(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
}

// Why name (lower case, with no "*." or trailing dot) is not a host name, or "".
std::string NameProblem(std::string_view name) {
  if (name.empty()) return "the name is empty";
  if (name.size() > kMaxNameBytes) return fmt::format("longer than {} bytes", kMaxNameBytes);
  if (name.find('*') != std::string_view::npos) {
    return "a wildcard must be the whole first label, as in *.example.com";
  }
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = std::min(name.find('.', start), name.size());
    std::string_view label = name.substr(start, end - start);
    if (label.empty()) return "has an empty label";
    if (label.size() > kMaxLabelBytes) {
      return fmt::format("has a label over {} bytes", kMaxLabelBytes);
    }
    if (!std::all_of(label.begin(), label.end(), LabelCharacter)) {
      return fmt::format("label {:?} has a character other than a letter, digit, - or _", label);
    }
    if (label.front() == '-' || label.back() == '-') {
      return fmt::format("label {:?} starts or ends with -", label);
    }
    start = end + 1;
  }
  return "";
}

// inet_pton's reading of text, with no zone and no NUL.
std::optional<IpAddress> ReadAddress(std::string_view text) {
  if (text.find('\0') != std::string_view::npos) return std::nullopt;
  const std::string copy(text);
  if (copy.find(':') == std::string::npos) {
    in_addr v4{};
    if (inet_pton(AF_INET, copy.c_str(), &v4) != 1) return std::nullopt;
    return IpAddress::V4(ntohl(v4.s_addr));
  }
  std::array<uint8_t, 16> v6{};
  if (inet_pton(AF_INET6, copy.c_str(), v6.data()) != 1) return std::nullopt;
  return IpAddress::V6(v6);
}

}  // namespace

Expected<IpAddress> ParseIpAddress(std::string_view text, std::string_view field) {
  if (text.find('%') != std::string_view::npos) {
    return Invalid(field, text, "an address with a zone (%) is link-local");
  }
  auto address = ReadAddress(text);
  if (!address) {
    return Invalid(field, text, "not an IPv4 or IPv6 address");
  }
  return *address;
}

Expected<Cidr> ParseCidr(std::string_view text, std::string_view field) {
  size_t slash = text.find('/');
  if (slash == std::string_view::npos) {
    auto address = ReadAddress(text);
    if (address) {
      return Invalid(
          field, text,
          fmt::format("needs a prefix length, as in {}/{}", text, address->v6 ? 128 : 32));
    }
    return Invalid(field, text, "needs a prefix length: ADDRESS/LENGTH, as in 10.0.0.0/8");
  }
  std::string_view written = text.substr(0, slash);
  SMOLBOX_ASSIGN_OR_RETURN(IpAddress base, ParseIpAddress(written, field));
  // A v4-mapped range ("::ffff:10.0.0.0/104") is the IPv4 range it maps, by its last 32 bits.
  const bool mapped = !base.v6 && written.find(':') != std::string_view::npos;
  const unsigned bits = mapped || base.v6 ? 128 : 32;
  auto prefix = Decimal(text.substr(slash + 1), bits);
  if (!prefix || (mapped && *prefix < 96)) {
    return Invalid(
        field, text,
        fmt::format("the prefix length must be a number from {} to {}", mapped ? 96 : 0, bits));
  }
  if (mapped) *prefix -= 96;
  Cidr cidr{base, static_cast<int>(*prefix)};
  Cidr network = cidr;
  for (unsigned bit = *prefix; bit < (base.v6 ? 128u : 32u); ++bit) {
    network.base.bytes[bit / 8] &= static_cast<uint8_t>(~(0x80u >> (bit % 8)));
  }
  if (network.base != base) {
    return Invalid(
        field, text,
        fmt::format("has bits set past its prefix: the network is {}", network.ToString()));
  }
  return cidr;
}

Expected<CidrRule> ParseCidrRule(std::string_view text, std::string_view field) {
  // The port follows the prefix length, so an IPv6 address's colons come before the slash.
  size_t slash = text.find('/');
  size_t colon = slash == std::string_view::npos ? std::string_view::npos : text.find(':', slash);
  CidrRule rule;
  SMOLBOX_ASSIGN_OR_RETURN(rule.cidr, ParseCidr(text.substr(0, colon), field));
  if (colon != std::string_view::npos) {
    SMOLBOX_ASSIGN_OR_RETURN(rule.port, ParsePort(text.substr(colon + 1), text, field));
  }
  return rule;
}

Expected<HostRule> ParseHostRule(std::string_view text, std::string_view field) {
  constexpr std::string_view kAddress =
      "an IP address is not a name: --allow-cidr allows addresses";
  size_t colon = text.find(':');
  if (ReadAddress(text)) return Invalid(field, text, kAddress);  // an IPv6 address, colons and all
  if (colon != text.rfind(':')) return Invalid(field, text, "has more than one ':'");
  HostRule rule;
  std::string name(text.substr(0, colon));
  if (colon != std::string_view::npos) {
    SMOLBOX_ASSIGN_OR_RETURN(rule.port, ParsePort(text.substr(colon + 1), text, field));
  }
  if (name.starts_with("*.")) {
    rule.subdomains = true;
    name.erase(0, 2);
  }
  if (name.ends_with('.')) name.pop_back();
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // Once the trailing dot is gone: "127.0.0.1." is the address too.
  if (ReadAddress(name)) return Invalid(field, text, kAddress);
  if (std::string problem = NameProblem(name); !problem.empty()) {
    return Invalid(field, text, problem);
  }
  rule.name = std::move(name);
  return rule;
}

Expected<SocketAddress> ParseSocketAddress(std::string_view text, uint16_t default_port,
                                           std::string_view field) {
  // "[fd00::1]:53", "10.0.0.1:53", or an address alone: "fd00::1", "10.0.0.1".
  std::string_view address = text;
  std::optional<std::string_view> port;
  if (text.starts_with('[')) {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return Invalid(field, text, "has [ with no ]");
    address = text.substr(1, close - 1);
    std::string_view after = text.substr(close + 1);
    if (!after.empty() && !after.starts_with(':')) {
      return Invalid(field, text, "only :PORT may follow ]");
    }
    if (!after.empty()) port = after.substr(1);
  } else if (std::count(text.begin(), text.end(), ':') == 1) {
    size_t colon = text.find(':');
    address = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  SocketAddress out;
  SMOLBOX_ASSIGN_OR_RETURN(out.address, ParseIpAddress(address, field));
  out.port = default_port;
  if (port) {
    SMOLBOX_ASSIGN_OR_RETURN(out.port, ParsePort(*port, text, field));
  }
  return out;
}

}  // namespace smolbox
