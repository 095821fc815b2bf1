// What the egress gateway reads from a sandbox and from the upstream: a connection's first bytes
// (TLS ClientHello, HTTP request), the sandbox's DNS queries, and the upstream's replies. No
// input crashes a parser, a name found is a host name, and what the gateway builds from a query
// parses back as that query.
#include <cctype>

#include "dns_message.h"
#include "first_bytes.h"
#include "fuzz_input.h"

namespace {

using smolbox::fuzz::Require;

void CheckFirstBytes(std::string_view text) {
  auto seen = smolbox::net::FindFirstBytesName(text);
  if (seen.state != smolbox::net::FirstBytesName::kFound) return;
  Require(!seen.names.empty(), "a name was found");
  for (const std::string& name : seen.names) {
    for (unsigned char c : name) {
      Require(std::islower(c) || std::isdigit(c) || c == '-' || c == '_' || c == '.', "a found name is a lower-case host name");
    }
  }
}

void CheckDns(const uint8_t* data, size_t size) {
  std::span<const uint8_t> wire(data, size);
  auto question = smolbox::net::ParseDnsQuery(wire);
  if (question) {
    auto sent = smolbox::net::ParseDnsQuery(smolbox::net::UpstreamQuery(*question, 0x4242));
    Require(sent && sent->name == question->name && sent->type == question->type && sent->id == 0x4242,
            "the upstream query is the question");
    auto refusal = smolbox::net::DnsErrorReply(question->id, &*question, smolbox::net::kRcodeRefused);
    Require(refusal.size() >= 12, "a refusal is a message");
    // The input as the upstream's reply to the same question: whatever it holds, what reaches
    // the sandbox parses.
    auto answer = smolbox::net::ParseUpstreamReply(wire, *question, question->id, 600);
    if (answer) Require(smolbox::net::ParseDnsQuery(answer->reply).has_value() == false, "a reply is not a query");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CheckFirstBytes(smolbox::fuzz::AsText(data, size));
  CheckDns(data, size);
  return 0;
}
