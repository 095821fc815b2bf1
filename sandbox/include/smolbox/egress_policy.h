// An egress policy: which hosts a sandbox may reach, and the floor that no rule lowers.
//
//   auto rule = smolbox::ParseHostRule("*.example.com:443", "--allow-host");  // or an error
//   smolbox::EgressPolicy policy;
//   policy.allow_hosts.push_back(*rule);
//   auto ip = smolbox::ParseIpAddress("169.254.169.254", "address");
//   smolbox::Verdict v = smolbox::JudgeConnection(policy, {*ip, 80, {"api.example.com"}}, {});
//   // v.allowed == false, and v.reason ==
//   //   "169.254.169.254 is in the floor: link-local (cloud metadata)"
//
// The model:
// - No rule and no --net: no egress at all (the spec's "network": "none").
// - --net opens the public internet. The rules add to it: --allow-cidr is the one way to reach
//   a private range (RFC 1918, CGNAT, ULA).
// - Without --net the rules are all there is: a name an --allow-host covers, on its port, and
//   the ranges of --allow-cidr.
// - --deny-cidr is checked before every allow rule, and the floor before everything.
//
// The floor is the host itself (loopback, "this network", its own addresses), link-local and
// the cloud metadata addresses, multicast and reserved space, in every spelling: a v4-mapped
// IPv6 address is the IPv4 address it maps, and an address that embeds an IPv4 address
// (IPv4-compatible, SIIT, NAT64, 6to4, Teredo) is judged as that address too.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "smolbox/error.h"

namespace smolbox {

struct IpAddress {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};  // network order; an IPv4 address uses the first 4

  static IpAddress V4(uint32_t host_order);
  // An IPv6 address, made the IPv4 address it maps when it is one (::ffff:a.b.c.d).
  static IpAddress V6(const std::array<uint8_t, 16>& bytes);
  // inet_ntop's spelling: "10.0.0.1", "fe80::1".
  std::string ToString() const;
  friend bool operator==(const IpAddress&, const IpAddress&) = default;
};

struct Cidr {
  IpAddress base;  // no bit set past the prefix
  int prefix = 0;

  bool Contains(const IpAddress& address) const;
  std::string ToString() const;  // "10.0.0.0/8"
  bool operator==(const Cidr&) const = default;
};

// --allow-host NAME[:PORT]: NAME, or with subdomains every name under it (written "*.NAME"),
// on one port or, port 0, on any.
struct HostRule {
  std::string name;  // lower case, no trailing dot, no "*."
  bool subdomains = false;
  uint16_t port = 0;

  bool Covers(std::string_view host) const;  // a name as the workload spelt it
  std::string ToString() const;              // as the flag takes it
  bool operator==(const HostRule&) const = default;
};

// --allow-cidr CIDR[:PORT]
struct CidrRule {
  Cidr cidr;
  uint16_t port = 0;  // 0: any

  std::string ToString() const;
  bool operator==(const CidrRule&) const = default;
};

struct SocketAddress {
  IpAddress address;
  uint16_t port = 0;

  std::string ToString() const;  // "10.0.0.1:53", "[fd00::1]:53"
  bool operator==(const SocketAddress&) const = default;
};

struct EgressPolicy {
  bool open = false;  // --net: the public internet
  std::vector<HostRule> allow_hosts;
  std::vector<CidrRule> allow_cidrs;
  std::vector<Cidr> deny_cidrs;

  // Whether the sandbox has any egress at all.
  bool Enabled() const { return open || !allow_hosts.empty() || !allow_cidrs.empty(); }
  bool operator==(const EgressPolicy&) const = default;
};

// Strict parsers of what users write. Each error names field (the flag, "--allow-cidr", or the
// spec's field) and says what is wrong with the text. Addresses are inet_pton's: dotted quads
// without leading zeros, and IPv6 without a zone.
Expected<IpAddress> ParseIpAddress(std::string_view text, std::string_view field);
// ADDRESS/LENGTH, with no bit set past LENGTH.
Expected<Cidr> ParseCidr(std::string_view text, std::string_view field);
Expected<HostRule> ParseHostRule(std::string_view text, std::string_view field);
Expected<CidrRule> ParseCidrRule(std::string_view text, std::string_view field);
// IP[:PORT] or [IPV6]:PORT, for --dns-server; PORT defaults to default_port.
Expected<SocketAddress> ParseSocketAddress(std::string_view text, uint16_t default_port,
                                           std::string_view field);

// Why address can never be reached, whatever the rules ("loopback", "link-local (cloud
// metadata)", "the host's own address"), or nothing. host_addresses are the host's own, in
// the network namespace the gateway dials from.
std::optional<std::string> FloorReason(const IpAddress& address,
                                       std::span<const IpAddress> host_addresses);
// "RFC 1918", "CGNAT", "ULA", ...: reachable only through an --allow-cidr that covers it.
std::optional<std::string> PrivateRange(const IpAddress& address);

// Whether the sandbox's resolver answers for name at all.
bool NameAllowed(const EgressPolicy& policy, std::string_view name);

// A connection the workload asks for: where to, and the allowed names the gateway's resolver
// answered with this address (within their TTL).
struct Destination {
  IpAddress address;
  uint16_t port = 0;
  std::vector<std::string> names;
};

struct Verdict {
  bool allowed = false;
  std::string reason;  // for the result's egress log, in either case
  // Allowed through a name: the first bytes (TLS SNI, HTTP Host) must name a host that an
  // --allow-host covers on this port (FirstBytesNameAllowed).
  bool check_name = false;
};

Verdict JudgeConnection(const EgressPolicy& policy, const Destination& destination,
                        std::span<const IpAddress> host_addresses);
// For a connection whose verdict says check_name: whether the name its first bytes carry is
// one an --allow-host covers on port.
bool FirstBytesNameAllowed(const EgressPolicy& policy, std::string_view name, uint16_t port);

}  // namespace smolbox
