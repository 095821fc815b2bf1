#include "smolbox/egress_policy.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_support.h"

namespace smolbox {
namespace {

using smolbox::testing::ErrorOf;

// Addresses here are only parsed and judged; nothing is dialled.
IpAddress Ip(const std::string& text) {
  auto address = ParseIpAddress(text, "test");
  EXPECT_TRUE(address) << text << ": " << ErrorOf(address);
  return address.value_or(IpAddress{});
}

HostRule Host(const std::string& text) {
  auto rule = ParseHostRule(text, "--allow-host");
  EXPECT_TRUE(rule) << ErrorOf(rule);
  return rule.value_or(HostRule{});
}

CidrRule CidrOf(const std::string& text) {
  auto rule = ParseCidrRule(text, "--allow-cidr");
  EXPECT_TRUE(rule) << ErrorOf(rule);
  return rule.value_or(CidrRule{});
}

std::string FloorOf(const std::string& address, const std::vector<IpAddress>& host = {}) {
  return FloorReason(Ip(address), host).value_or("<reachable>");
}

// ---------------------------------------------------------------------------
// Parsing

TEST(ParseIpAddress, reads_inet_ptons_spellings_and_a_v4_mapped_address_as_the_ipv4_it_maps) {
  EXPECT_EQ(Ip("192.0.2.1").ToString(), "192.0.2.1");
  EXPECT_FALSE(Ip("192.0.2.1").v6);
  EXPECT_EQ(Ip("2001:DB8::1").ToString(), "2001:db8::1");
  IpAddress mapped = Ip("::ffff:127.0.0.1");
  EXPECT_FALSE(mapped.v6);
  EXPECT_EQ(mapped, Ip("127.0.0.1"));
  EXPECT_EQ(Ip("::ffff:7f00:1"), Ip("127.0.0.1"));
}

TEST(ParseIpAddress, refuses_other_spellings_a_zone_and_a_nul_naming_the_field) {
  for (std::string text : {"010.0.0.1", "0x7f.0.0.1", "2130706433", "127.1", "1.2.3.4.5", "",
                           " 1.2.3.4", "1.2.3.4 ", "256.0.0.1", ":::1"}) {
    EXPECT_EQ(ErrorOf(ParseIpAddress(text, "--dns-server")),
              "--dns-server: \"" + text + "\": not an IPv4 or IPv6 address")
        << text;
  }
  EXPECT_EQ(ErrorOf(ParseIpAddress("fe80::1%eth0", "f")),
            "f: \"fe80::1%eth0\": an address with a zone (%) is link-local");
  EXPECT_FALSE(ParseIpAddress(std::string("1.2.3.4\0junk", 12), "f"));
}

TEST(ParseCidr, reads_a_network_of_either_family_and_a_v4_mapped_one_as_ipv4) {
  auto v4 = ParseCidr("10.0.0.0/8", "f");
  ASSERT_TRUE(v4) << ErrorOf(v4);
  EXPECT_EQ(v4->ToString(), "10.0.0.0/8");
  auto v6 = ParseCidr("fd00::/8", "f");
  ASSERT_TRUE(v6) << ErrorOf(v6);
  EXPECT_EQ(v6->ToString(), "fd00::/8");
  auto mapped = ParseCidr("::ffff:10.0.0.0/104", "f");
  ASSERT_TRUE(mapped) << ErrorOf(mapped);
  EXPECT_EQ(mapped->ToString(), "10.0.0.0/8");
  EXPECT_EQ(ParseCidr("0.0.0.0/0", "f")->ToString(), "0.0.0.0/0");
}

TEST(ParseCidr, refuses_a_missing_or_out_of_range_prefix_and_bits_past_it) {
  EXPECT_EQ(
      ErrorOf(ParseCidr("10.0.0.1/8", "--allow-cidr")),
      "--allow-cidr: \"10.0.0.1/8\": has bits set past its prefix: the network is 10.0.0.0/8");
  EXPECT_EQ(ErrorOf(ParseCidr("10.0.0.1", "--deny-cidr")),
            "--deny-cidr: \"10.0.0.1\": needs a prefix length, as in 10.0.0.1/32");
  EXPECT_EQ(ErrorOf(ParseCidr("fd00::1", "f")),
            "f: \"fd00::1\": needs a prefix length, as in fd00::1/128");
  EXPECT_EQ(ErrorOf(ParseCidr("10.0.0.0/33", "f")),
            "f: \"10.0.0.0/33\": the prefix length must be a number from 0 to 32");
  EXPECT_EQ(ErrorOf(ParseCidr("fd00::/129", "f")),
            "f: \"fd00::/129\": the prefix length must be a number from 0 to 128");
  EXPECT_EQ(ErrorOf(ParseCidr("::ffff:10.0.0.0/95", "f")),
            "f: \"::ffff:10.0.0.0/95\": the prefix length must be a number from 96 to 128");
  for (std::string text : {"10.0.0.0/", "10.0.0.0/-1", "10.0.0.0/+8", "10.0.0.0/8 ", "/8"}) {
    EXPECT_FALSE(ParseCidr(text, "f")) << text;
  }
  EXPECT_EQ(ErrorOf(ParseCidr("example.com", "f")),
            "f: \"example.com\": needs a prefix length: ADDRESS/LENGTH, as in 10.0.0.0/8");
}

TEST(ParseCidrRule, reads_a_port_after_the_prefix_length_of_either_family) {
  CidrRule v4 = CidrOf("10.0.0.0/8:443");
  EXPECT_EQ(v4.cidr.ToString(), "10.0.0.0/8");
  EXPECT_EQ(v4.port, 443);
  CidrRule v6 = CidrOf("fd00::/8:8443");
  EXPECT_EQ(v6.cidr.ToString(), "fd00::/8");
  EXPECT_EQ(v6.port, 8443);
  EXPECT_EQ(CidrOf("198.51.100.0/24").port, 0);
  EXPECT_EQ(CidrOf("198.51.100.0/24:80").ToString(), "198.51.100.0/24:80");
}

TEST(ParseCidrRule, refuses_port_0_an_empty_port_and_one_out_of_range) {
  EXPECT_EQ(ErrorOf(ParseCidrRule("10.0.0.0/8:0", "--allow-cidr")),
            "--allow-cidr: \"10.0.0.0/8:0\": port 0 is not a port: ports are 1 to 65535");
  EXPECT_EQ(ErrorOf(ParseCidrRule("10.0.0.0/8:", "--allow-cidr")),
            "--allow-cidr: \"10.0.0.0/8:\": the port is empty");
  EXPECT_EQ(ErrorOf(ParseCidrRule("10.0.0.0/8:65536", "f")),
            "f: \"10.0.0.0/8:65536\": the port \"65536\" is not a number from 1 to 65535");
  EXPECT_FALSE(ParseCidrRule("10.0.0.0/8:http", "f"));
}

TEST(ParseHostRule, lowers_the_name_drops_a_trailing_dot_and_reads_a_wildcard_and_a_port) {
  HostRule plain = Host("Example.COM.");
  EXPECT_EQ(plain.name, "example.com");
  EXPECT_FALSE(plain.subdomains);
  EXPECT_EQ(plain.port, 0);
  HostRule wild = Host("*.example.com:443");
  EXPECT_EQ(wild.name, "example.com");
  EXPECT_TRUE(wild.subdomains);
  EXPECT_EQ(wild.port, 443);
  EXPECT_EQ(wild.ToString(), "*.example.com:443");
  EXPECT_EQ(Host("under_score.example").name, "under_score.example");
}

TEST(ParseHostRule, refuses_addresses_bad_ports_and_whatever_is_not_a_host_name) {
  auto error = [](const std::string& text) { return ErrorOf(ParseHostRule(text, "--allow-host")); };
  const std::string ip = "an IP address is not a name: --allow-cidr allows addresses";
  EXPECT_EQ(error("192.0.2.1"), "--allow-host: \"192.0.2.1\": " + ip);
  EXPECT_EQ(error("192.0.2.1:80"), "--allow-host: \"192.0.2.1:80\": " + ip);
  EXPECT_EQ(error("::1"), "--allow-host: \"::1\": " + ip);
  EXPECT_EQ(error("127.0.0.1."), "--allow-host: \"127.0.0.1.\": " + ip);
  EXPECT_EQ(error("127.0.0.1.:80"), "--allow-host: \"127.0.0.1.:80\": " + ip);
  EXPECT_EQ(error("example.com:0"),
            "--allow-host: \"example.com:0\": port 0 is not a port: ports are 1 to 65535");
  EXPECT_EQ(error("a:b:c"), "--allow-host: \"a:b:c\": has more than one ':'");
  EXPECT_EQ(error(""), "--allow-host: \"\": the name is empty");
  EXPECT_EQ(error(":443"), "--allow-host: \":443\": the name is empty");
  EXPECT_EQ(error("*"),
            "--allow-host: \"*\": a wildcard must be the whole first label, as in *.example.com");
  EXPECT_EQ(error("*."), "--allow-host: \"*.\": the name is empty");
  EXPECT_EQ(
      error("a.*.com"),
      "--allow-host: \"a.*.com\": a wildcard must be the whole first label, as in *.example.com");
  EXPECT_EQ(error("a..com"), "--allow-host: \"a..com\": has an empty label");
  EXPECT_EQ(error(".a.com"), "--allow-host: \".a.com\": has an empty label");
  EXPECT_EQ(error("-a.com"), "--allow-host: \"-a.com\": label \"-a\" starts or ends with -");
  EXPECT_EQ(error("exa mple.com"),
            "--allow-host: \"exa mple.com\": label \"exa mple\" has a character other than a "
            "letter, digit, - or _");
  EXPECT_EQ(error(std::string(64, 'a') + ".com"),
            "--allow-host: \"" + std::string(64, 'a') + ".com\": has a label over 63 bytes");
  std::string long_name;
  for (int i = 0; i < 64; ++i) long_name += "abc.";
  long_name += "com";  // 259 bytes
  EXPECT_EQ(error(long_name), "--allow-host: \"" + long_name + "\": longer than 253 bytes");
}

TEST(ParseSocketAddress, reads_an_address_with_or_without_a_port_of_either_family) {
  auto read = [](const std::string& text) {
    auto address = ParseSocketAddress(text, 53, "--dns-server");
    return address ? address->ToString() : ErrorOf(address);
  };
  EXPECT_EQ(read("192.0.2.53"), "192.0.2.53:53");
  EXPECT_EQ(read("192.0.2.53:5353"), "192.0.2.53:5353");
  EXPECT_EQ(read("2001:db8::53"), "[2001:db8::53]:53");
  EXPECT_EQ(read("[2001:db8::53]"), "[2001:db8::53]:53");
  EXPECT_EQ(read("[2001:db8::53]:5353"), "[2001:db8::53]:5353");
  EXPECT_EQ(read("[2001:db8::53"), "--dns-server: \"[2001:db8::53\": has [ with no ]");
  EXPECT_EQ(read("[2001:db8::53]x"), "--dns-server: \"[2001:db8::53]x\": only :PORT may follow ]");
  EXPECT_EQ(read("[2001:db8::53]:"), "--dns-server: \"[2001:db8::53]:\": the port is empty");
  EXPECT_EQ(read("192.0.2.53:0"),
            "--dns-server: \"192.0.2.53:0\": port 0 is not a port: ports are 1 to 65535");
  EXPECT_EQ(read("dns.example"), "--dns-server: \"dns.example\": not an IPv4 or IPv6 address");
}

// ---------------------------------------------------------------------------
// The floor

TEST(FloorReason, holds_the_host_link_local_metadata_multicast_and_reserved_space) {
  EXPECT_EQ(FloorOf("127.0.0.1"), "loopback");
  EXPECT_EQ(FloorOf("127.255.255.254"), "loopback");
  EXPECT_EQ(FloorOf("0.0.0.0"), "\"this network\", which reaches the host");
  EXPECT_EQ(FloorOf("0.1.2.3"), "\"this network\", which reaches the host");
  EXPECT_EQ(FloorOf("169.254.169.254"), "link-local (cloud metadata)");
  EXPECT_EQ(FloorOf("169.254.0.1"), "link-local (cloud metadata)");
  EXPECT_EQ(FloorOf("100.100.100.200"), "cloud metadata (Alibaba)");
  EXPECT_EQ(FloorOf("168.63.129.16"), "cloud platform endpoint (Azure)");
  EXPECT_EQ(FloorOf("224.0.0.1"), "multicast");
  EXPECT_EQ(FloorOf("239.255.255.250"), "multicast");
  EXPECT_EQ(FloorOf("255.255.255.255"), "reserved (and broadcast)");
  EXPECT_EQ(FloorOf("240.0.0.1"), "reserved (and broadcast)");
  EXPECT_EQ(FloorOf("::"), "unspecified (::), which reaches the host");
  EXPECT_EQ(FloorOf("::1"), "loopback");
  EXPECT_EQ(FloorOf("fe80::1"), "link-local");
  EXPECT_EQ(FloorOf("febf:ffff::1"), "link-local");
  EXPECT_EQ(FloorOf("fd00:ec2::254"), "cloud metadata (AWS)");
  EXPECT_EQ(FloorOf("ff02::1"), "multicast");
}

TEST(FloorReason, holds_every_ipv6_spelling_that_carries_a_floor_ipv4_address) {
  EXPECT_EQ(FloorOf("::ffff:169.254.169.254"), "link-local (cloud metadata)");  // v4-mapped
  EXPECT_EQ(FloorOf("::127.0.0.1"), "it embeds 127.0.0.1: loopback");           // IPv4-compatible
  EXPECT_EQ(FloorOf("::ffff:0:127.0.0.1"), "it embeds 127.0.0.1: loopback");    // SIIT
  EXPECT_EQ(FloorOf("64:ff9b::a9fe:a9fe"),
            "it embeds 169.254.169.254: link-local (cloud metadata)");
  EXPECT_EQ(FloorOf("2002:7f00:1::"), "it embeds 127.0.0.1: loopback");  // 6to4
  EXPECT_EQ(FloorOf("2001:0:a9fe:a9fe::1"),
            "it embeds 169.254.169.254: link-local (cloud metadata)");  // a Teredo server
  EXPECT_EQ(FloorOf("2001:0:c000:201::80ff:fffe"),
            "it embeds 127.0.0.1: loopback");  // a Teredo client: its address inverted
}

TEST(FloorReason, holds_the_hosts_own_addresses_in_every_spelling) {
  const std::vector<IpAddress> host = {Ip("192.0.2.10"), Ip("2001:db8::10")};
  EXPECT_EQ(FloorOf("192.0.2.10", host), "the host's own address");
  EXPECT_EQ(FloorOf("::ffff:192.0.2.10", host), "the host's own address");
  EXPECT_EQ(FloorOf("2001:db8::10", host), "the host's own address");
  EXPECT_EQ(FloorOf("2002:c000:20a::", host), "it embeds 192.0.2.10: the host's own address");
  EXPECT_EQ(FloorOf("192.0.2.11", host), "<reachable>");
}

TEST(FloorReason, leaves_public_and_private_addresses_to_the_rules) {
  for (std::string text : {"192.0.2.1", "198.51.100.7", "203.0.113.255", "2001:db8::1", "10.0.0.1",
                           "fd12::1", "::ffff:203.0.113.5", "64:ff9b::cb00:7105"}) {
    EXPECT_EQ(FloorOf(text), "<reachable>") << text;
  }
}

TEST(PrivateRange, names_rfc1918_cgnat_ula_site_local_and_local_nat64_in_every_spelling) {
  auto range = [](const std::string& text) { return PrivateRange(Ip(text)).value_or("<public>"); };
  EXPECT_EQ(range("10.1.2.3"), "RFC 1918");
  EXPECT_EQ(range("172.16.0.1"), "RFC 1918");
  EXPECT_EQ(range("172.31.255.255"), "RFC 1918");
  EXPECT_EQ(range("172.32.0.1"), "<public>");
  EXPECT_EQ(range("192.168.1.1"), "RFC 1918");
  EXPECT_EQ(range("100.64.0.1"), "CGNAT (RFC 6598)");
  EXPECT_EQ(range("100.127.255.255"), "CGNAT (RFC 6598)");
  EXPECT_EQ(range("100.128.0.1"), "<public>");
  EXPECT_EQ(range("fd12::1"), "ULA (RFC 4193)");
  EXPECT_EQ(range("fc00::1"), "ULA (RFC 4193)");
  EXPECT_EQ(range("fec0::1"), "site-local");
  EXPECT_EQ(range("64:ff9b:1::1"), "local-use NAT64 (RFC 8215)");
  EXPECT_EQ(range("::ffff:10.0.0.1"), "RFC 1918");
  EXPECT_EQ(range("64:ff9b::a00:1"), "it embeds 10.0.0.1: RFC 1918");
  EXPECT_EQ(range("2002:c0a8:101::"), "it embeds 192.168.1.1: RFC 1918");
  EXPECT_EQ(range("203.0.113.5"), "<public>");
}

// ---------------------------------------------------------------------------
// Names

TEST(HostRuleCovers, a_name_alone_or_only_the_names_under_a_wildcard_in_any_case) {
  HostRule exact = Host("example.com");
  EXPECT_TRUE(exact.Covers("example.com"));
  EXPECT_TRUE(exact.Covers("EXAMPLE.com."));
  EXPECT_FALSE(exact.Covers("api.example.com"));
  EXPECT_FALSE(exact.Covers("badexample.com"));
  EXPECT_FALSE(exact.Covers("example.com.evil"));
  HostRule wild = Host("*.example.com");
  EXPECT_TRUE(wild.Covers("api.example.com"));
  EXPECT_TRUE(wild.Covers("a.b.EXAMPLE.com."));
  EXPECT_FALSE(wild.Covers("example.com"));
  EXPECT_FALSE(wild.Covers("aexample.com"));
  EXPECT_FALSE(wild.Covers(".example.com"));
}

TEST(NameAllowed, every_name_with_net_and_only_covered_ones_with_allow_host) {
  EgressPolicy open;
  open.open = true;
  EXPECT_TRUE(NameAllowed(open, "anything.example"));
  EgressPolicy listed;
  listed.allow_hosts = {Host("api.example.com:443"), Host("*.cdn.example")};
  EXPECT_TRUE(NameAllowed(listed, "api.example.com"));
  EXPECT_TRUE(NameAllowed(listed, "x.cdn.example"));
  EXPECT_FALSE(NameAllowed(listed, "example.com"));
  EXPECT_FALSE(NameAllowed(EgressPolicy{}, "api.example.com"));
}

// ---------------------------------------------------------------------------
// Connections

Verdict Judge(const EgressPolicy& policy, const std::string& address, uint16_t port,
              std::vector<std::string> names = {}, const std::vector<IpAddress>& host = {}) {
  return JudgeConnection(policy, Destination{Ip(address), port, std::move(names)}, host);
}

TEST(JudgeConnection, with_no_rule_and_no_net_nothing_is_reachable) {
  Verdict v = Judge(EgressPolicy{}, "203.0.113.5", 80);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.reason, "the sandbox has no network");
}

TEST(JudgeConnection, net_opens_public_addresses_but_not_the_floor_or_private_ranges) {
  EgressPolicy open;
  open.open = true;
  Verdict v = Judge(open, "203.0.113.5", 80);
  EXPECT_TRUE(v.allowed);
  EXPECT_FALSE(v.check_name);
  EXPECT_EQ(v.reason, "allowed: --net opens the public internet");
  v = Judge(open, "169.254.169.254", 80);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.reason, "169.254.169.254 is in the floor: link-local (cloud metadata)");
  EXPECT_FALSE(Judge(open, "::ffff:127.0.0.1", 8080).allowed);
  EXPECT_FALSE(Judge(open, "2002:a9fe:a9fe::", 80).allowed);
  EXPECT_FALSE(Judge(open, "192.0.2.10", 22, {}, {Ip("192.0.2.10")}).allowed);
  v = Judge(open, "10.0.0.5", 80);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.reason, "10.0.0.5 is in a private range (RFC 1918): only an --allow-cidr reaches it");
}

TEST(JudgeConnection, allow_cidr_reaches_a_private_range_on_its_port_but_never_the_floor) {
  EgressPolicy policy;
  policy.allow_cidrs = {CidrOf("10.0.0.0/8:8443"), CidrOf("0.0.0.0/0")};
  Verdict v = Judge(policy, "10.1.2.3", 8443);
  EXPECT_TRUE(v.allowed);
  EXPECT_EQ(v.reason, "allowed by --allow-cidr 10.0.0.0/8:8443");
  v = Judge(policy, "10.1.2.3", 80);  // 0.0.0.0/0 covers it on any port
  EXPECT_TRUE(v.allowed);
  EXPECT_EQ(v.reason, "allowed by --allow-cidr 0.0.0.0/0");
  EXPECT_FALSE(Judge(policy, "127.0.0.1", 80).allowed);
  EXPECT_FALSE(Judge(policy, "169.254.169.254", 80).allowed);
  EgressPolicy one_port;
  one_port.allow_cidrs = {CidrOf("198.51.100.0/24:443")};
  EXPECT_TRUE(Judge(one_port, "198.51.100.9", 443).allowed);
  v = Judge(one_port, "198.51.100.9", 80);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.reason, "198.51.100.9:80 matches no rule");
  EXPECT_FALSE(Judge(one_port, "203.0.113.5", 443).allowed);
}

TEST(JudgeConnection, deny_cidr_comes_before_every_allow_rule_and_sees_embedded_addresses) {
  EgressPolicy policy;
  policy.open = true;
  policy.allow_cidrs = {CidrOf("203.0.113.0/24")};
  policy.deny_cidrs = {*ParseCidr("203.0.113.0/25", "f")};
  Verdict v = Judge(policy, "203.0.113.5", 443);
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.reason, "203.0.113.5 is denied by --deny-cidr 203.0.113.0/25");
  EXPECT_FALSE(Judge(policy, "64:ff9b::cb00:7105", 443).allowed);  // NAT64 of 203.0.113.5
  EXPECT_TRUE(Judge(policy, "203.0.113.200", 443).allowed);
}

TEST(JudgeConnection, allow_host_reaches_its_names_addresses_on_its_port_and_asks_for_the_name) {
  EgressPolicy policy;
  policy.allow_hosts = {Host("api.example.com:443")};
  Verdict v = Judge(policy, "203.0.113.5", 443, {"api.example.com"});
  EXPECT_TRUE(v.allowed);
  EXPECT_TRUE(v.check_name);
  EXPECT_EQ(v.reason, "allowed by --allow-host api.example.com:443 (api.example.com)");
  v = Judge(policy, "203.0.113.5", 80, {"api.example.com"});
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.reason,
            "203.0.113.5:80 matches no rule: no --allow-host covers api.example.com on port 80");
  v = Judge(policy, "203.0.113.5", 443);  // the IP literal, which no name resolved to
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.reason, "203.0.113.5:443 matches no rule");
}

TEST(JudgeConnection, an_allowed_name_that_resolves_into_the_floor_or_a_private_range_is_refused) {
  EgressPolicy policy;
  policy.allow_hosts = {Host("api.example.com")};
  for (std::string address :
       {"127.0.0.1", "169.254.169.254", "::1", "::ffff:169.254.169.254", "10.0.0.1", "fd00::1"}) {
    EXPECT_FALSE(Judge(policy, address, 443, {"api.example.com"}).allowed) << address;
  }
}

TEST(FirstBytesNameAllowed, only_a_name_an_allow_host_covers_on_that_port) {
  EgressPolicy policy;
  policy.allow_hosts = {Host("api.example.com:443"), Host("*.cdn.example")};
  EXPECT_TRUE(FirstBytesNameAllowed(policy, "api.example.com", 443));
  EXPECT_TRUE(FirstBytesNameAllowed(policy, "img.cdn.example", 8080));
  EXPECT_FALSE(FirstBytesNameAllowed(policy, "api.example.com", 8443));
  EXPECT_FALSE(FirstBytesNameAllowed(policy, "other.example", 443));
  EXPECT_FALSE(FirstBytesNameAllowed(policy, "", 443));
}

}  // namespace
}  // namespace smolbox
