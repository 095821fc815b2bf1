#include "dns_message.h"

// stdbool.h first: it marks bool as defined, and ldns's common.h then leaves true, false and
// bool alone, which it would otherwise define as macros, even in C++.
#include <fmt/format.h>
#include <ldns/ldns.h>
#include <stdbool.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <memory>

namespace smolbox::net {
namespace {

struct PacketFree {
  void operator()(ldns_pkt* p) const { ldns_pkt_free(p); }
};
struct RdfFree {
  void operator()(ldns_rdf* r) const { ldns_rdf_deep_free(r); }
};
using Packet = std::unique_ptr<ldns_pkt, PacketFree>;
using Rdf = std::unique_ptr<ldns_rdf, RdfFree>;

Expected<Packet> Decode(std::span<const uint8_t> wire, const char* what) {
  ldns_pkt* raw = nullptr;
  ldns_status status = ldns_wire2pkt(&raw, wire.data(), wire.size());
  if (status != LDNS_STATUS_OK) {
    return std::unexpected(
        Error{what, fmt::format("does not parse: {}", ldns_get_errorstr_by_id(status)), 0});
  }
  return Packet(raw);
}

std::vector<uint8_t> Encode(const ldns_pkt* packet) {
  uint8_t* data = nullptr;
  size_t size = 0;
  if (ldns_pkt2wire(&data, packet, &size) != LDNS_STATUS_OK) return {};
  std::vector<uint8_t> out(data, data + size);
  std::free(data);
  return out;
}

std::string NameText(const ldns_rdf* name) {
  char* text = ldns_rdf2str(name);
  std::string out = text ? text : "";
  std::free(text);
  if (out.size() > 1 && out.back() == '.') out.pop_back();
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

Rdf WireName(const DnsQuestion& question) {
  return Rdf(ldns_rdf_new_frm_data(LDNS_RDF_TYPE_DNAME, question.wire_name.size(),
                                   question.wire_name.data()));
}

ldns_rr* QuestionRecord(const DnsQuestion& question) {
  ldns_rr* rr = ldns_rr_new();
  ldns_rr_set_owner(rr, WireName(question).release());
  ldns_rr_set_type(rr, static_cast<ldns_rr_type>(question.type));
  ldns_rr_set_class(rr, static_cast<ldns_rr_class>(question.klass));
  ldns_rr_set_question(rr, true);
  return rr;
}

Packet ReplyTo(uint16_t id, const DnsQuestion* question, uint8_t rcode) {
  Packet reply(ldns_pkt_new());
  ldns_pkt_set_id(reply.get(), id);
  ldns_pkt_set_qr(reply.get(), true);
  ldns_pkt_set_rd(reply.get(), true);
  ldns_pkt_set_ra(reply.get(), true);
  ldns_pkt_set_rcode(reply.get(), rcode);
  if (question) ldns_pkt_push_rr(reply.get(), LDNS_SECTION_QUESTION, QuestionRecord(*question));
  return reply;
}

bool SameQuestion(const ldns_pkt* packet, const DnsQuestion& question) {
  if (ldns_pkt_qdcount(packet) != 1) return false;
  const ldns_rr* q = ldns_rr_list_rr(ldns_pkt_question(packet), 0);
  Rdf asked = WireName(question);
  Rdf got(ldns_rdf_clone(ldns_rr_owner(q)));
  ldns_dname2canonical(got.get());
  return ldns_dname_compare(asked.get(), got.get()) == 0 && ldns_rr_get_type(q) == question.type &&
         ldns_rr_get_class(q) == question.klass;
}

// The address an A or AAAA record holds, if it is one.
bool RecordAddress(const ldns_rr* rr, IpAddress& out) {
  if (ldns_rr_rd_count(rr) != 1) return false;
  const ldns_rdf* data = ldns_rr_rdf(rr, 0);
  const uint8_t* bytes = ldns_rdf_data(data);
  if (ldns_rr_get_type(rr) == LDNS_RR_TYPE_A && ldns_rdf_size(data) == 4) {
    out = IpAddress::V4((uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) |
                        (uint32_t{bytes[2]} << 8) | bytes[3]);
    return true;
  }
  if (ldns_rr_get_type(rr) == LDNS_RR_TYPE_AAAA && ldns_rdf_size(data) == 16) {
    std::array<uint8_t, 16> v6{};
    std::copy(bytes, bytes + 16, v6.begin());
    out = IpAddress::V6(v6);
    return true;
  }
  return false;
}

}  // namespace

std::string DnsTypeName(uint16_t type) {
  const ldns_rr_descriptor* descriptor = ldns_rr_descript(type);
  if (descriptor && descriptor->_name) return descriptor->_name;
  return fmt::format("TYPE{}", type);
}

bool DnsHeaderId(std::span<const uint8_t> wire, uint16_t& id) {
  if (wire.size() < 12) return false;
  id = static_cast<uint16_t>((wire[0] << 8) | wire[1]);
  return true;
}

Expected<DnsQuestion> ParseDnsQuery(std::span<const uint8_t> wire) {
  SMOLBOX_ASSIGN_OR_RETURN(Packet packet, Decode(wire, "dns query"));
  if (ldns_pkt_qr(packet.get()) || ldns_pkt_get_opcode(packet.get()) != LDNS_PACKET_QUERY) {
    return std::unexpected(Error{"dns query", "is not a standard query", 0});
  }
  if (ldns_pkt_qdcount(packet.get()) != 1) {
    return std::unexpected(Error{"dns query", "must ask exactly one question", 0});
  }
  const ldns_rr* q = ldns_rr_list_rr(ldns_pkt_question(packet.get()), 0);
  Rdf name(ldns_rdf_clone(ldns_rr_owner(q)));
  ldns_dname2canonical(name.get());
  DnsQuestion question;
  question.id = ldns_pkt_id(packet.get());
  question.name = NameText(name.get());
  question.wire_name.assign(ldns_rdf_data(name.get()),
                            ldns_rdf_data(name.get()) + ldns_rdf_size(name.get()));
  question.type = static_cast<uint16_t>(ldns_rr_get_type(q));
  question.klass = static_cast<uint16_t>(ldns_rr_get_class(q));
  return question;
}

std::vector<uint8_t> DnsErrorReply(uint16_t id, const DnsQuestion* question, uint8_t rcode) {
  return Encode(ReplyTo(id, question, rcode).get());
}

std::vector<uint8_t> UpstreamQuery(const DnsQuestion& question, uint16_t id) {
  // Built from the question record itself, not ldns_pkt_query_new, which reads type 0 as A.
  Packet query(ldns_pkt_new());
  ldns_pkt_set_id(query.get(), id);
  ldns_pkt_set_rd(query.get(), true);
  ldns_pkt_push_rr(query.get(), LDNS_SECTION_QUESTION, QuestionRecord(question));
  return Encode(query.get());
}

Expected<DnsAnswer> ParseUpstreamReply(std::span<const uint8_t> wire, const DnsQuestion& question,
                                       uint16_t id, uint32_t max_ttl) {
  SMOLBOX_ASSIGN_OR_RETURN(Packet packet, Decode(wire, "dns reply"));
  if (!ldns_pkt_qr(packet.get()) || ldns_pkt_id(packet.get()) != id ||
      !SameQuestion(packet.get(), question)) {
    return std::unexpected(Error{"dns reply", "answers another query", 0});
  }
  DnsAnswer answer;
  answer.rcode = static_cast<uint8_t>(ldns_pkt_get_rcode(packet.get()));
  Packet reply = ReplyTo(question.id, &question, answer.rcode);
  const ldns_rr_list* records = ldns_pkt_answer(packet.get());
  for (size_t i = 0; i < ldns_rr_list_rr_count(records); ++i) {
    const ldns_rr* rr = ldns_rr_list_rr(records, i);
    ldns_rr_type type = ldns_rr_get_type(rr);
    if (type != LDNS_RR_TYPE_A && type != LDNS_RR_TYPE_AAAA && type != LDNS_RR_TYPE_CNAME) continue;
    if (ldns_rr_get_class(rr) != LDNS_RR_CLASS_IN) continue;
    IpAddress address;
    if (RecordAddress(rr, address))
      answer.addresses.emplace_back(address, ldns_rr_ttl(rr));
    else if (type != LDNS_RR_TYPE_CNAME)
      continue;  // an A or AAAA record of the wrong size
    ldns_rr* copy = ldns_rr_clone(rr);
    ldns_rr_set_ttl(copy, std::min(ldns_rr_ttl(rr), max_ttl));
    ldns_pkt_push_rr(reply.get(), LDNS_SECTION_ANSWER, copy);
  }
  answer.reply = Encode(reply.get());
  return answer;
}

}  // namespace smolbox::net
