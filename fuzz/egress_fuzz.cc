// The egress policy's parsers (--allow-host, --allow-cidr, --deny-cidr, --dns-server) and the
// floor: whatever a parser accepts reads back the same from its own spelling, and no rule lets
// a connection reach an address in the floor.
#include "fuzz_input.h"
#include "smolbox/egress_policy.h"

namespace {

using smolbox::fuzz::Require;

void CheckAddress(std::string_view text) {
  auto address = smolbox::ParseIpAddress(text, "fuzz");
  if (!address) return;
  auto again = smolbox::ParseIpAddress(address->ToString(), "fuzz");
  Require(again && *again == *address, "an address reads back from its own spelling");
  // The widest policy there is: the floor must still hold.
  smolbox::EgressPolicy all;
  all.open = true;
  all.allow_cidrs = {*smolbox::ParseCidrRule("0.0.0.0/0", "fuzz"),
                     *smolbox::ParseCidrRule("::/0", "fuzz")};
  const smolbox::Destination to{*address, 443, {"fuzz.example"}};
  auto verdict = smolbox::JudgeConnection(all, to, {});
  if (smolbox::FloorReason(*address, {}))
    Require(!verdict.allowed, "the floor holds under every rule");
}

void CheckCidrRule(std::string_view text) {
  auto rule = smolbox::ParseCidrRule(text, "fuzz");
  if (!rule) return;
  Require(rule->cidr.Contains(rule->cidr.base), "a network contains its base");
  auto again = smolbox::ParseCidrRule(rule->ToString(), "fuzz");
  Require(again && again->cidr.base == rule->cidr.base && again->cidr.prefix == rule->cidr.prefix &&
              again->port == rule->port,
          "a CIDR rule reads back from its own spelling");
}

void CheckHostRule(std::string_view text) {
  auto rule = smolbox::ParseHostRule(text, "fuzz");
  if (!rule) return;
  Require(rule->Covers(rule->name) != rule->subdomains, "a wildcard covers only names under it");
  Require(rule->subdomains == rule->Covers("a." + rule->name), "a wildcard covers a subdomain");
  auto again = smolbox::ParseHostRule(rule->ToString(), "fuzz");
  Require(again && again->name == rule->name && again->subdomains == rule->subdomains &&
              again->port == rule->port,
          "a host rule reads back from its own spelling");
}

void CheckSocketAddress(std::string_view text) {
  auto address = smolbox::ParseSocketAddress(text, 53, "fuzz");
  if (!address) return;
  auto again = smolbox::ParseSocketAddress(address->ToString(), 1, "fuzz");
  Require(again && again->address == address->address && again->port == address->port,
          "a resolver's address reads back from its own spelling");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text = smolbox::fuzz::AsText(data, size);
  CheckAddress(text);
  CheckCidrRule(text);
  CheckHostRule(text);
  CheckSocketAddress(text);
  return 0;
}
