// The gateway's parts that judge bytes, without a sandbox: the name in a connection's first
// bytes, the DNS messages through ldns, the memory of answers, and the upstream from
// resolv.conf.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dns_message.h"
#include "first_bytes.h"
#include "name_memory.h"
#include "uplink.h"

namespace smolbox::net {
namespace {

void Put16(std::string& out, size_t v) {
  out += static_cast<char>((v >> 8) & 0xff);
  out += static_cast<char>(v & 0xff);
}

void Put24(std::string& out, size_t v) {
  out += static_cast<char>((v >> 16) & 0xff);
  Put16(out, v & 0xffff);
}

// A TLS 1.2-style ClientHello record, with a server_name extension when sni is not empty.
std::string ClientHello(const std::string& sni) {
  std::string extensions;
  if (!sni.empty()) {
    std::string list;
    list += '\0';  // host_name
    Put16(list, sni.size());
    list += sni;
    std::string body;
    Put16(body, list.size());
    body += list;
    Put16(extensions, 0);  // server_name
    Put16(extensions, body.size());
    extensions += body;
  }
  Put16(extensions, 0x0017);  // extended_master_secret, empty: an extension before or after
  Put16(extensions, 0);
  std::string hello = "\x03\x03" + std::string(32, 'r');
  hello += '\0';                                // no session id
  hello += std::string("\x00\x02\x13\x01", 4);  // one cipher suite
  hello += std::string("\x01\x00", 2);          // null compression
  Put16(hello, extensions.size());
  hello += extensions;
  std::string handshake = "\x01";
  Put24(handshake, hello.size());
  handshake += hello;
  std::string record = "\x16\x03\x01";
  Put16(record, handshake.size());
  return record + handshake;
}

TEST(FirstBytes, a_client_hello_gives_its_server_name_in_lower_case) {
  FirstBytesName seen = FindFirstBytesName(ClientHello("API.Allowed.test"));
  ASSERT_EQ(seen.state, FirstBytesName::kFound) << seen.why;
  EXPECT_STREQ(seen.protocol, "tls");
  EXPECT_EQ(seen.names, (std::vector<std::string>{"api.allowed.test"}));
}

TEST(FirstBytes, a_client_hello_cut_short_asks_for_more_and_one_without_a_name_has_none) {
  std::string hello = ClientHello("api.allowed.test");
  for (size_t cut : {size_t{1}, size_t{4}, size_t{5}, hello.size() - 1}) {
    EXPECT_EQ(FindFirstBytesName(hello.substr(0, cut)).state, FirstBytesName::kNeedMore) << cut;
  }
  EXPECT_EQ(FindFirstBytesName(ClientHello("")).state, FirstBytesName::kNone);
  EXPECT_EQ(FindFirstBytesName(ClientHello("bad name\x01")).state, FirstBytesName::kNone);
}

TEST(FirstBytes, a_client_hello_longer_than_its_record_is_refused_not_judged_on_a_part) {
  std::string hello = ClientHello("api.allowed.test");
  // Claim a handshake longer than the record that carries it.
  hello[6] = '\x7f';
  EXPECT_EQ(FindFirstBytesName(hello).state, FirstBytesName::kNone);
}

TEST(FirstBytes, an_http_request_gives_its_host_and_an_absolute_target_counts_too) {
  FirstBytesName seen =
      FindFirstBytesName("GET / HTTP/1.1\r\nUser-Agent: x\r\nHOST: Api.Allowed.Test:8080\r\n\r\n");
  ASSERT_EQ(seen.state, FirstBytesName::kFound) << seen.why;
  EXPECT_EQ(seen.names, (std::vector<std::string>{"api.allowed.test"}));
  seen = FindFirstBytesName("GET http://other.test/x HTTP/1.1\r\nHost: api.allowed.test\r\n\r\n");
  ASSERT_EQ(seen.state, FirstBytesName::kFound);
  EXPECT_EQ(seen.names, (std::vector<std::string>{"other.test", "api.allowed.test"}));
}

TEST(FirstBytes, requests_without_one_clear_host_have_none) {
  EXPECT_EQ(FindFirstBytesName("GET / HTTP/1.1\r\nHost: a.test\r\n").state,
            FirstBytesName::kNeedMore);
  for (const char* request : {"GET / HTTP/1.1\r\n\r\n",                                  // no Host
                              "GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n",  // two
                              "GET / HTTP/1.1\r\nHost: [2001:db8::1]\r\n\r\n",  // a literal
                              "GET / HTTP/1.1\r\nHost: a test\r\n\r\n",
                              "SSH-2.0-OpenSSH_9.2\r\n\r\n", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"}) {
    EXPECT_EQ(FindFirstBytesName(request).state, FirstBytesName::kNone) << request;
  }
  EXPECT_EQ(FindFirstBytesName(std::string(kMaxFirstBytes, 'a')).state, FirstBytesName::kNone);
}

// A query for name and type, as a stub resolver sends it.
std::vector<uint8_t> Query(uint16_t id, const std::string& name, uint16_t type,
                           uint16_t questions = 1) {
  std::vector<uint8_t> q = {static_cast<uint8_t>(id >> 8),
                            static_cast<uint8_t>(id),
                            0x01,
                            0x00,
                            0,
                            static_cast<uint8_t>(questions),
                            0,
                            0,
                            0,
                            0,
                            0,
                            0};
  for (int i = 0; i < questions; ++i) {
    size_t at = 0;
    while (at <= name.size()) {
      size_t dot = name.find('.', at);
      if (dot == std::string::npos) dot = name.size();
      q.push_back(static_cast<uint8_t>(dot - at));
      q.insert(q.end(), name.begin() + static_cast<long>(at),
               name.begin() + static_cast<long>(dot));
      at = dot + 1;
    }
    q.insert(q.end(), {0, static_cast<uint8_t>(type >> 8), static_cast<uint8_t>(type), 0, 1});
  }
  return q;
}

// The upstream's reply to query: its question, then A records of address with ttl, and a TXT.
std::vector<uint8_t> Reply(std::vector<uint8_t> query,
                           const std::vector<std::array<uint8_t, 4>>& addresses, uint32_t ttl) {
  query[2] = 0x81;
  query[3] = 0x80;
  query[7] = static_cast<uint8_t>(addresses.size() + 1);
  auto record = [&](uint16_t type, std::vector<uint8_t> data) {
    query.insert(query.end(), {0xc0, 0x0c, static_cast<uint8_t>(type >> 8),
                               static_cast<uint8_t>(type), 0, 1, static_cast<uint8_t>(ttl >> 24),
                               static_cast<uint8_t>(ttl >> 16), static_cast<uint8_t>(ttl >> 8),
                               static_cast<uint8_t>(ttl), 0, static_cast<uint8_t>(data.size())});
    query.insert(query.end(), data.begin(), data.end());
  };
  for (const auto& a : addresses) record(kDnsTypeA, {a[0], a[1], a[2], a[3]});
  record(16, {4, 'l', 'e', 'a', 'k'});
  return query;
}

TEST(DnsMessage, a_query_gives_its_one_question_in_lower_case) {
  auto q = ParseDnsQuery(Query(0x1234, "Api.Allowed.Test", kDnsTypeAaaa));
  ASSERT_TRUE(q) << q.error().ToString();
  EXPECT_EQ(q->id, 0x1234);
  EXPECT_EQ(q->name, "api.allowed.test");
  EXPECT_EQ(q->type, kDnsTypeAaaa);
  EXPECT_EQ(DnsTypeName(q->type), "AAAA");
  EXPECT_EQ(DnsTypeName(16), "TXT");
}

TEST(DnsMessage, several_questions_a_reply_and_garbage_are_not_queries) {
  EXPECT_FALSE(ParseDnsQuery(Query(1, "a.test", kDnsTypeA, 2)));
  auto reply = Query(1, "a.test", kDnsTypeA);
  reply[2] |= 0x80;
  EXPECT_FALSE(ParseDnsQuery(reply));
  EXPECT_FALSE(ParseDnsQuery(std::vector<uint8_t>{1, 2, 3}));
  uint16_t id = 0;
  EXPECT_FALSE(DnsHeaderId(std::vector<uint8_t>{1, 2, 3}, id));
}

TEST(DnsMessage, the_upstream_query_carries_only_the_question_under_a_new_id) {
  auto q = ParseDnsQuery(Query(7, "api.allowed.test", kDnsTypeA));
  ASSERT_TRUE(q);
  auto sent = ParseDnsQuery(UpstreamQuery(*q, 99));
  ASSERT_TRUE(sent);
  EXPECT_EQ(sent->id, 99);
  EXPECT_EQ(sent->name, "api.allowed.test");
  EXPECT_EQ(sent->type, kDnsTypeA);
  // Every type goes as asked; ldns's query builder would have made type 0 an A query.
  q->type = 0;
  auto zero = ParseDnsQuery(UpstreamQuery(*q, 99));
  ASSERT_TRUE(zero);
  EXPECT_EQ(zero->type, 0);
}

TEST(DnsMessage,
     a_reply_gives_its_addresses_and_the_workload_gets_them_capped_without_other_records) {
  auto q = ParseDnsQuery(Query(7, "api.allowed.test", kDnsTypeA));
  ASSERT_TRUE(q);
  auto answer = ParseUpstreamReply(
      Reply(Query(99, "api.allowed.test", kDnsTypeA), {{192, 0, 2, 10}}, 86400), *q, 99, 600);
  ASSERT_TRUE(answer) << answer.error().ToString();
  ASSERT_EQ(answer->addresses.size(), 1u);
  EXPECT_EQ(answer->addresses[0].first.ToString(), "192.0.2.10");
  EXPECT_EQ(answer->addresses[0].second, 86400u);
  const auto& r = answer->reply;
  ASSERT_GE(r.size(), 12u);
  EXPECT_EQ((r[0] << 8) | r[1], 7);  // the workload's own id
  EXPECT_EQ(r[7], 1);                // the A record, not the TXT
  // The record's TTL, the 4 bytes before its 2-byte length and 4-byte address.
  size_t ttl_at = r.size() - 10;
  EXPECT_EQ(
      (uint32_t{r[ttl_at]} << 24) | (r[ttl_at + 1] << 16) | (r[ttl_at + 2] << 8) | r[ttl_at + 3],
      600u);
}

TEST(DnsMessage, a_reply_to_another_id_or_question_is_passed_over) {
  auto q = ParseDnsQuery(Query(7, "api.allowed.test", kDnsTypeA));
  ASSERT_TRUE(q);
  EXPECT_FALSE(ParseUpstreamReply(
      Reply(Query(98, "api.allowed.test", kDnsTypeA), {{1, 2, 3, 4}}, 5), *q, 99, 600));
  EXPECT_FALSE(ParseUpstreamReply(Reply(Query(99, "other.test", kDnsTypeA), {{1, 2, 3, 4}}, 5), *q,
                                  99, 600));
  EXPECT_FALSE(
      ParseUpstreamReply(Query(99, "api.allowed.test", kDnsTypeA), *q, 99, 600));  // not a reply
}

TEST(DnsMessage, an_error_reply_answers_the_question_with_the_rcode) {
  auto q = ParseDnsQuery(Query(7, "other.test", kDnsTypeA));
  ASSERT_TRUE(q);
  auto r = DnsErrorReply(q->id, &*q, kRcodeNxdomain);
  ASSERT_GE(r.size(), 12u);
  EXPECT_EQ(r[3] & 0x0f, kRcodeNxdomain);
  EXPECT_EQ(r[2] & 0x80, 0x80);
  EXPECT_EQ(r[5], 1);  // the question
  EXPECT_EQ(r[7], 0);  // no answer
}

TEST(NameMemory, an_answer_is_remembered_for_its_ttl_within_the_clamps) {
  NameMemory memory;
  auto now = NameMemory::Clock::now();
  IpAddress a = IpAddress::V4(0xc000020a);
  memory.Remember("api.allowed.test", a, 0, now);  // clamped up to the minimum
  EXPECT_EQ(memory.NamesFor(a, now + std::chrono::seconds(NameMemory::kMinTtlSeconds - 1)),
            (std::vector<std::string>{"api.allowed.test"}));
  EXPECT_TRUE(memory.NamesFor(a, now + std::chrono::seconds(NameMemory::kMinTtlSeconds)).empty());
  memory.Remember("www.allowed.test", a, 1u << 30, now);  // clamped down to the maximum
  EXPECT_TRUE(memory.NamesFor(a, now + std::chrono::seconds(NameMemory::kMaxTtlSeconds)).empty());
  EXPECT_TRUE(memory.NamesFor(IpAddress::V4(0xc0000214), now).empty());
}

TEST(NameMemory, a_flood_of_answers_keeps_it_bounded_and_forgets_the_soonest_to_expire) {
  NameMemory memory;
  auto now = NameMemory::Clock::now();
  memory.Remember("first.test", IpAddress::V4(1), NameMemory::kMinTtlSeconds, now);
  for (uint32_t i = 0; i < NameMemory::kMaxEntries; ++i) {
    memory.Remember("n.test", IpAddress::V4(1000 + i), NameMemory::kMaxTtlSeconds, now);
  }
  EXPECT_TRUE(memory.NamesFor(IpAddress::V4(1), now).empty());
  EXPECT_EQ(memory.NamesFor(IpAddress::V4(1000 + NameMemory::kMaxEntries - 1), now).size(), 1u);
}

TEST(Uplink, the_upstream_is_the_first_nameserver_and_its_absence_is_an_error) {
  auto server = FirstNameserver(
      "# comment\nsearch x\nnameserver 2001:db8::53\nnameserver 10.0.0.1\n", "resolv.conf");
  ASSERT_TRUE(server) << server.error().ToString();
  EXPECT_EQ(server->ToString(), "[2001:db8::53]:53");
  auto none = FirstNameserver("search x\n", "resolv.conf");
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().ToString().find("--dns-server"), std::string::npos);
  EXPECT_FALSE(FirstNameserver("nameserver 010.0.0.1\n", "resolv.conf"));
}

TEST(Uplink, an_egress_netns_that_is_not_a_network_namespace_is_an_error_naming_the_flag) {
  SocketAddress dns{IpAddress::V4(0x7f000001), 53};
  for (const char* path : {"/nonexistent/netns", "/etc/hostname", "/proc/self/ns/mnt"}) {
    auto uplink = Uplink::Open(path, dns);
    ASSERT_FALSE(uplink) << path;
    EXPECT_NE(uplink.error().ToString().find("--egress-netns"), std::string::npos)
        << uplink.error().ToString();
  }
  EXPECT_TRUE(Uplink::Open("/proc/self/ns/net", dns));
}

}  // namespace
}  // namespace smolbox::net
