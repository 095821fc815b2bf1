// The sandbox's CA trust store: what of the host's (or a guest rootfs's) /etc holds it, and the
// PEM bundle a caller adds to it (--ca-bundle, for a company's TLS-inspecting proxy).
//
//   SMOLBOX_TRY(CheckCaBundle(spec.ca_bundle));          // field "ca_bundle"
//   for (const char* entry : kTrustStoreEntries) ...     // bound read-only into the sandbox's /etc
#pragma once

#include <string>
#include <string_view>

#include "smolbox/error.h"

namespace smolbox {

// Below /etc, what the distributions keep their trust store in: Debian's and Ubuntu's
// certs directory (its links lead into /usr/share/ca-certificates, which the image's /usr
// has), Fedora's and RHEL's, and the lone bundle of Alpine and Arch. Certificates only:
// /etc/ssl/private and /etc/pki/tls/private are never among them.
inline constexpr const char* kTrustStoreEntries[] = {"ssl/certs", "ssl/cert.pem", "pki/tls/certs",
                                                     "pki/tls/cert.pem", "pki/ca-trust"};
// Below /etc, the one-file bundles a store holds, the first found being the one a caller's
// certificates are added to.
inline constexpr const char* kTrustBundles[] = {"ssl/certs/ca-certificates.crt", "pki/tls/certs/ca-bundle.crt",
                                                "ssl/cert.pem"};
// Where a sandbox given a CA bundle finds the whole store in one file: its own bundle followed by
// the caller's certificates.
inline constexpr const char* kSandboxCaBundle = "/etc/smolbox/ca-certificates.crt";
// The variables by which the common clients take a bundle without flags: OpenSSL's default
// paths (Python's ssl, curl), Node's extra CAs, requests, pip and curl's own. Each exec gets
// them naming kSandboxCaBundle, unless it sets them itself.
inline constexpr const char* kCaBundleVariables[] = {"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE",
                                                     "PIP_CERT", "CURL_CA_BUNDLE"};
inline constexpr bool IsCaBundleVariable(std::string_view name) {
  for (std::string_view variable : kCaBundleVariables) {
    if (name == variable) return true;
  }
  return false;
}
inline constexpr size_t kMaxCaBundleBytes = 1 << 20;
// The largest distribution bundle read to be joined with a caller's (Debian's is 200 KiB).
inline constexpr size_t kMaxTrustBundleBytes = 16 << 20;

// A caller's bundle: PEM CERTIFICATE blocks, with comment lines between them as distributions
// write them, at most kMaxCaBundleBytes. Anything else, a private key above all, is an error
// naming the field "ca_bundle", the line and the reason. Empty: no bundle, which is fine.
Expected<void> CheckCaBundle(std::string_view pem);

// The sandbox's whole bundle: the store's own (empty when it has none) and then the caller's,
// each ending in a newline.
std::string JoinCaBundles(std::string_view own, std::string_view added);

}  // namespace smolbox
