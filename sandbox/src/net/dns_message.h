// DNS messages as the egress gateway's resolver reads and writes them, through ldns: the
// workload's query, the query sent upstream, and the reply the workload gets.
//
//   auto q = ParseDnsQuery(bytes);                  // one question, or why not
//   auto up = UpstreamQuery(*q, RandomId());         // only the question goes upstream
//   auto a = ParseUpstreamReply(reply, *q, up_id);  // addresses, and the workload's reply
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "smolbox/egress_policy.h"
#include "smolbox/error.h"

namespace smolbox::net {

struct DnsQuestion {
  uint16_t id = 0;
  std::string name;                // lower case, no trailing dot; ldns's escapes for odd bytes
  std::vector<uint8_t> wire_name;  // the same, lower case, as it goes on the wire
  uint16_t type = 0;
  uint16_t klass = 0;
};

inline constexpr uint16_t kDnsTypeA = 1;
inline constexpr uint16_t kDnsTypeCname = 5;
inline constexpr uint16_t kDnsTypeAaaa = 28;
inline constexpr uint16_t kDnsClassIn = 1;
inline constexpr uint8_t kRcodeServfail = 2;
inline constexpr uint8_t kRcodeNxdomain = 3;
inline constexpr uint8_t kRcodeRefused = 5;

// "A", "AAAA", "TXT", or "TYPE99".
std::string DnsTypeName(uint16_t type);

// A standard query with exactly one question; anything else is an error. A message too short
// for its header has no id to answer, and gets no reply.
Expected<DnsQuestion> ParseDnsQuery(std::span<const uint8_t> wire);
// The id of a message that is at least a header, to refuse it under that id.
bool DnsHeaderId(std::span<const uint8_t> wire, uint16_t& id);
// A reply with no answer and rcode, to question (the NXDOMAIN or REFUSED the policy gives).
std::vector<uint8_t> DnsErrorReply(uint16_t id, const DnsQuestion* question, uint8_t rcode);
// The query the gateway sends upstream for question, under id: its name, type and class,
// recursion desired, and nothing of what else the workload's query carried.
std::vector<uint8_t> UpstreamQuery(const DnsQuestion& question, uint16_t id);

struct DnsAnswer {
  uint8_t rcode = 0;
  // Every A and AAAA address in the answer, with its TTL as given.
  std::vector<std::pair<IpAddress, uint32_t>> addresses;
  // To the workload, under the question's id: the question, the answer section's A, AAAA and
  // CNAME records with their TTLs capped at max_ttl, and the upstream's rcode.
  std::vector<uint8_t> reply;
};

// The upstream's reply to the query sent under id for question; a reply to another id or
// question, or one that does not parse, is an error.
Expected<DnsAnswer> ParseUpstreamReply(std::span<const uint8_t> wire, const DnsQuestion& question,
                                       uint16_t id, uint32_t max_ttl);

}  // namespace smolbox::net
