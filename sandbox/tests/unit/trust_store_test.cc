#include "trust_store.h"

#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "smolbox/spec.h"
#include "test_support.h"

namespace smolbox {
namespace {

using smolbox::testing::ErrorOf;

// A real certificate's shape: base64 lines between the markers (the bytes need not be DER for
// the check, which reads PEM's text and leaves X.509 to the clients).
constexpr const char* kCert =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBszCCAVmgAwIBAgIUSmolvmCheckTestCertificateAAAAAAAwCgYIKoZIzj0E\n"
    "AwIwJzElMCMGA1UEAwwcc21vbHZtLWNoZWNrIHRlc3QgaW50ZXJuZXQgQ0E=\n"
    "-----END CERTIFICATE-----\n";

TEST(CheckCaBundle, takes_certificates_with_comments_between_them_and_crlf_lines) {
  EXPECT_TRUE(CheckCaBundle(""));
  EXPECT_TRUE(CheckCaBundle(kCert));
  std::string two = std::string("# Issuer: CN=one\n") + kCert + "\n# Issuer: CN=two\n" + kCert;
  EXPECT_TRUE(CheckCaBundle(two)) << ErrorOf(CheckCaBundle(two));
  std::string crlf;
  for (char c : std::string(kCert)) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  EXPECT_TRUE(CheckCaBundle(crlf)) << ErrorOf(CheckCaBundle(crlf));
}

TEST(CheckCaBundle, refuses_keys_and_broken_blocks_naming_the_field_and_the_line) {
  EXPECT_EQ(ErrorOf(CheckCaBundle("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")),
            "ca_bundle: line 1: a PRIVATE KEY block; a trust store takes CERTIFICATE blocks only");
  EXPECT_EQ(ErrorOf(CheckCaBundle("just text\n")), "ca_bundle: holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
  EXPECT_EQ(ErrorOf(CheckCaBundle("-----BEGIN CERTIFICATE-----\nAAAA\n")),
            "ca_bundle: line 1: a CERTIFICATE block with no END line");
  EXPECT_EQ(ErrorOf(CheckCaBundle("-----BEGIN CERTIFICATE-----\nAA AA\n-----END CERTIFICATE-----\n")),
            "ca_bundle: line 2: not base64, inside the CERTIFICATE block of line 1");
  EXPECT_EQ(ErrorOf(CheckCaBundle("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")),
            "ca_bundle: line 2: an empty CERTIFICATE block");
  EXPECT_EQ(ErrorOf(CheckCaBundle("-----END CERTIFICATE-----\n")), "ca_bundle: line 1: an END line outside any block");
  EXPECT_EQ(ErrorOf(CheckCaBundle(std::string(kCert) + std::string(1, '\0'))),
            "ca_bundle: holds a NUL byte: a bundle is PEM text");
  std::string huge(kMaxCaBundleBytes + 1, '#');
  EXPECT_NE(ErrorOf(CheckCaBundle(huge)).find("ca_bundle: is 1048577 bytes"), std::string::npos);
}

TEST(CheckCaBundle, is_part_of_validating_a_spec_and_a_sandbox) {
  auto spec = ParseRunSpec(R"({"argv": ["/bin/true"], "ca_bundle": "-----BEGIN RSA PRIVATE KEY-----\nAA\n-----END RSA PRIVATE KEY-----\n"})");
  ASSERT_TRUE(spec) << spec.error().ToString();
  EXPECT_NE(ErrorOf(ValidateRunSpec(*spec)).find("ca_bundle: line 1: a RSA PRIVATE KEY block"), std::string::npos);
  EXPECT_NE(ErrorOf(ValidateSandboxSpec(spec->sandbox)).find("ca_bundle:"), std::string::npos);
  auto good = ParseRunSpec(std::string(R"({"argv": ["/bin/true"], "ca_bundle": )") + nlohmann::json(kCert).dump() + "}");
  ASSERT_TRUE(good) << good.error().ToString();
  EXPECT_EQ(good->sandbox.ca_bundle, kCert);
  EXPECT_TRUE(ValidateRunSpec(*good)) << ErrorOf(ValidateRunSpec(*good));
  EXPECT_EQ(ErrorOf(ParseRunSpec(R"({"ca_bundle": 7})")), "ca_bundle: must be a string");
}

TEST(JoinCaBundles, puts_the_callers_after_the_stores_own_each_ending_a_line) {
  EXPECT_EQ(JoinCaBundles("", kCert), kCert);
  EXPECT_EQ(JoinCaBundles("own", "added"), "own\nadded\n");
  EXPECT_EQ(JoinCaBundles("own\n", kCert), std::string("own\n") + kCert);
}

}  // namespace
}  // namespace smolbox
