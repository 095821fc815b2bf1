// The floor, the private ranges and the judgement of one connection (egress_policy.h). The
// parsers of what users write are in egress_parse.cc.
#include "smolbox/egress_policy.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "mutant.h"

namespace smolbox {
namespace {

// A range of the floor or of private space, with what it is, for the verdict's reason.
struct NamedRange {
  Cidr range;
  const char* what;
};

Cidr V4Range(uint32_t base, int prefix) { return Cidr{IpAddress::V4(base), prefix}; }

Cidr V6Range(std::array<uint8_t, 16> base, int prefix) {
  IpAddress address;
  address.v6 = true;
  address.bytes = base;
  return Cidr{address, prefix};
}

const std::vector<NamedRange>& FloorRanges() {
  static const std::vector<NamedRange> ranges = {
      // Connecting to 0.0.0.0 or :: reaches the host's own listeners.
      {V4Range(0x00000000, 8), "\"this network\", which reaches the host"},
      {V4Range(0x7f000000, 8), "loopback"},
      {V4Range(0xa9fe0000, 16), "link-local (cloud metadata)"},
      {V4Range(0x646464c8, 32), "cloud metadata (Alibaba)"},
      // Azure's WireServer: a public address that each Azure VM reaches as a platform service.
      {V4Range(0xa83f8110, 32), "cloud platform endpoint (Azure)"},
      {V4Range(0xe0000000, 4), "multicast"},
      {V4Range(0xf0000000, 4), "reserved (and broadcast)"},
      {V6Range({}, 128), "unspecified (::), which reaches the host"},
      {V6Range({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 128), "loopback"},
      {V6Range({0xfe, 0x80}, 10), "link-local"},
      {V6Range({0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54}, 128),
       "cloud metadata (AWS)"},
      {V6Range({0xff}, 8), "multicast"},
  };
  return ranges;
}

const std::vector<NamedRange>& PrivateRanges() {
  static const std::vector<NamedRange> ranges = {
      {V4Range(0x0a000000, 8), "RFC 1918"},
      {V4Range(0xac100000, 12), "RFC 1918"},
      {V4Range(0xc0a80000, 16), "RFC 1918"},
      {V4Range(0x64400000, 10), "CGNAT (RFC 6598)"},
      {V6Range({0xfc}, 7), "ULA (RFC 4193)"},
      {V6Range({0xfe, 0xc0}, 10), "site-local"},
      // RFC 8215: a network's own translator, which may embed any IPv4 address anywhere.
      {V6Range({0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48), "local-use NAT64 (RFC 8215)"},
  };
  return ranges;
}

IpAddress V4At(const IpAddress& address, size_t offset, uint8_t mask = 0) {
  IpAddress v4;
  for (size_t i = 0; i < 4; ++i) v4.bytes[i] = address.bytes[offset + i] ^ mask;
  return v4;
}

bool ZeroBytes(const IpAddress& address, size_t from, size_t to) {
  return std::all_of(address.bytes.begin() + from, address.bytes.begin() + to,
                     [](uint8_t b) { return b == 0; });
}

// The IPv4 addresses an IPv6 address carries, which a translator or relay on the way may turn
// it into. (A v4-mapped address is already an IPv4 address here: IpAddress::V6.)
std::vector<IpAddress> EmbeddedIpv4(const IpAddress& address) {
  if (!address.v6) return {};
  const auto& b = address.bytes;
  if (ZeroBytes(address, 0, 12)) return {V4At(address, 12)};  // IPv4-compatible, ::a.b.c.d
  if (ZeroBytes(address, 0, 8) && b[8] == 0xff && b[9] == 0xff && b[10] == 0 && b[11] == 0) {
    return {V4At(address, 12)};  // SIIT, ::ffff:0:a.b.c.d
  }
  if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && ZeroBytes(address, 4, 12)) {
    return {V4At(address, 12)};  // NAT64's well-known prefix, 64:ff9b::a.b.c.d
  }
  if (b[0] == 0x20 && b[1] == 0x02) return {V4At(address, 2)};  // 6to4, 2002:AABB:CCDD::
  if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0) {
    return {V4At(address, 4), V4At(address, 12, 0xff)};  // Teredo: its server, and its client
  }
  return {};
}

// address and every IPv4 address it embeds, each with how to describe it.
std::vector<std::pair<IpAddress, std::string>> Forms(const IpAddress& address) {
  std::vector<std::pair<IpAddress, std::string>> forms = {{address, ""}};
  for (const IpAddress& v4 : EmbeddedIpv4(address)) {
    forms.emplace_back(v4, fmt::format("it embeds {}: ", v4.ToString()));
  }
  return forms;
}

std::optional<std::string> InRanges(const IpAddress& address,
                                    const std::vector<NamedRange>& ranges) {
  for (const auto& [form, prefix] : Forms(address)) {
    for (const NamedRange& r : ranges) {
      if (r.range.Contains(form)) return prefix + r.what;
    }
  }
  return std::nullopt;
}

std::optional<Cidr> DeniedBy(const EgressPolicy& policy, const IpAddress& address) {
  for (const auto& [form, prefix] : Forms(address)) {
    for (const Cidr& deny : policy.deny_cidrs) {
      if (deny.Contains(form)) return deny;
    }
  }
  return std::nullopt;
}

bool PortMatches(uint16_t rule_port, uint16_t port) { return rule_port == 0 || rule_port == port; }

std::string Lowered(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

Verdict Deny(std::string reason) { return Verdict{false, std::move(reason), false}; }
Verdict Allow(std::string reason, bool check_name = false) {
  return Verdict{true, std::move(reason), check_name};
}

// The verdict from the allowed names that resolved to the destination.
Verdict JudgeByName(const EgressPolicy& policy, const Destination& d) {
  for (const std::string& name : d.names) {
    for (const HostRule& rule : policy.allow_hosts) {
      if (rule.Covers(name) && PortMatches(rule.port, d.port)) {
        return Allow(fmt::format("allowed by --allow-host {} ({})", rule.ToString(), name), true);
      }
    }
  }
  std::string where = SocketAddress{d.address, d.port}.ToString();
  if (d.names.empty()) return Deny(fmt::format("{} matches no rule", where));
  return Deny(fmt::format("{} matches no rule: no --allow-host covers {} on port {}", where,
                          d.names.front(), d.port));
}

}  // namespace

IpAddress IpAddress::V4(uint32_t host_order) {
  IpAddress address;
  for (int i = 0; i < 4; ++i) address.bytes[i] = static_cast<uint8_t>(host_order >> (24 - 8 * i));
  return address;
}

IpAddress IpAddress::V6(const std::array<uint8_t, 16>& bytes) {
  IpAddress address;
  address.v6 = true;
  address.bytes = bytes;
  bool mapped = ZeroBytes(address, 0, 10) && bytes[10] == 0xff && bytes[11] == 0xff;
  return mapped ? V4At(address, 12) : address;
}

std::string IpAddress::ToString() const {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), text, sizeof text);
  return text;
}

bool Cidr::Contains(const IpAddress& address) const {
  if (address.v6 != base.v6) return false;
  int whole = prefix / 8;
  if (!std::equal(base.bytes.begin(), base.bytes.begin() + whole, address.bytes.begin())) {
    return false;
  }
  int rest = prefix % 8;
  if (rest == 0) return true;
  auto mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (base.bytes[whole] & mask) == (address.bytes[whole] & mask);
}

std::string Cidr::ToString() const { return fmt::format("{}/{}", base.ToString(), prefix); }

bool HostRule::Covers(std::string_view host) const {
  if (host.ends_with('.')) host.remove_suffix(1);
  std::string lowered = Lowered(host);
  if (!subdomains) return lowered == name;
  return lowered.size() > name.size() + 1 && lowered.ends_with(name) &&
         lowered[lowered.size() - name.size() - 1] == '.';
}

std::string HostRule::ToString() const {
  std::string text = (subdomains ? "*." : "") + name;
  return port == 0 ? text : fmt::format("{}:{}", text, port);
}

std::string CidrRule::ToString() const {
  return port == 0 ? cidr.ToString() : fmt::format("{}:{}", cidr.ToString(), port);
}

std::string SocketAddress::ToString() const {
  if (address.v6) return fmt::format("[{}]:{}", address.ToString(), port);
  return fmt::format("{}:{}", address.ToString(), port);
}

std::optional<std::string> FloorReason(const IpAddress& address,
                                       std::span<const IpAddress> host_addresses) {
  if (auto reason = InRanges(address, FloorRanges())) return reason;
  for (const auto& [form, prefix] : Forms(address)) {
    if (std::find(host_addresses.begin(), host_addresses.end(), form) != host_addresses.end()) {
      return prefix + "the host's own address";
    }
  }
  return std::nullopt;
}

std::optional<std::string> PrivateRange(const IpAddress& address) {
  return InRanges(address, PrivateRanges());
}

bool NameAllowed(const EgressPolicy& policy, std::string_view name) {
  if (policy.open) return true;
  return std::any_of(policy.allow_hosts.begin(), policy.allow_hosts.end(),
                     [&](const HostRule& rule) { return rule.Covers(name); });
}

Verdict JudgeConnection(const EgressPolicy& policy, const Destination& d,
                        std::span<const IpAddress> host_addresses) {
  const std::string address = d.address.ToString();
  if (!policy.Enabled()) return Deny("the sandbox has no network");
  if (auto floor = FloorReason(d.address, host_addresses); floor && SMOLBOX_PROTECTED("egress_floor")) {
    return Deny(fmt::format("{} is in the floor: {}", address, *floor));
  }
  if (auto deny = DeniedBy(policy, d.address); deny && SMOLBOX_PROTECTED("deny_cidr")) {
    return Deny(fmt::format("{} is denied by --deny-cidr {}", address, deny->ToString()));
  }
  for (const CidrRule& rule : policy.allow_cidrs) {
    if (rule.cidr.Contains(d.address) && PortMatches(rule.port, d.port)) {
      return Allow(fmt::format("allowed by --allow-cidr {}", rule.ToString()));
    }
  }
  if (auto range = PrivateRange(d.address); range && SMOLBOX_PROTECTED("private_ranges")) {
    return Deny(fmt::format("{} is in a private range ({}): only an --allow-cidr reaches it",
                            address, *range));
  }
  if (policy.open) return Allow("allowed: --net opens the public internet");
  if (!SMOLBOX_PROTECTED("egress_allowlist")) return Allow("allowed: the allowlist is off (mutant)", true);
  return JudgeByName(policy, d);
}

bool FirstBytesNameAllowed(const EgressPolicy& policy, std::string_view name, uint16_t port) {
  return std::any_of(policy.allow_hosts.begin(), policy.allow_hosts.end(), [&](const HostRule& r) {
    return r.Covers(name) && PortMatches(r.port, port);
  });
}

}  // namespace smolbox
