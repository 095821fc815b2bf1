// The test internet, for the egress tests: servers in a network namespace of their own, reached
// only from the uplink namespace the gateway dials from; smolbox itself runs in a client
// namespace with nothing but loopback, so that a gateway dialing from the wrong namespace
// reaches nothing. No test address is ever routed in the host's own namespace: nothing a test
// sends can leave the machine.
//
//   class Egress : public TestInternetTest {};
//   TEST_F(Egress, the_allowed_name_is_reached) {
//     Invocation run = internet().RunSmolbox({"run", "--json", "--egress-netns",
//         internet().uplink_netns_path(), "--", "/usr/bin/curl", "http://api.allowed.test/"});
//     EXPECT_EQ(run.result["stdout"], "server=192.0.2.10 host=api.allowed.test")
//         << internet().ServerLog();
//   }
//
// The internet (sbx-inet-XXXX), on its lo:
//   192.0.2.10 and 2001:db8::10  the allowed server: HTTP on 80 and 8080, TLS on 443 (192.0.2.10
//                                only), UDP echo on 9999
//   192.0.2.20                   a server that is not allowed: HTTP on 80 and 8080, TLS on 443
//   169.254.169.254              fake cloud metadata: HTTP on 80 and 8080
//   10.20.0.5                    a private-range server: HTTP on 80 and 8080
//   203.0.113.53                 DNS (dnsmasq), TTL 30 s; every name not below is NXDOMAIN:
//     api.allowed.test       A 192.0.2.10, AAAA 2001:db8::10
//     www.allowed.test       A 192.0.2.10
//     deep.sub.allowed.test  A 192.0.2.10
//     other.test             A 192.0.2.20
//     shared.test            A 192.0.2.10       (another name on the allowed IP: domain fronting)
//     metadata.allowed.test  A 169.254.169.254  (rebinding to metadata)
//     loopback.allowed.test  A 127.0.0.1
//     mapped.allowed.test    AAAA ::ffff:169.254.169.254
//     private.allowed.test   A 10.20.0.5
//     txt.allowed.test       TXT "exfil"
// HTTP: `GET /` answers `server=<local address> host=<Host>`; `GET /bytes/N` answers N bytes
// (up to 1 GiB, streamed). TLS, with a self-signed certificate (cert_path()), answers any
// request with `server=<addr> sni=<name or none> host=<Host>`.
//
// The uplink (sbx-uplink-XXXX): 198.18.0.1/30 and 2001:db8:ff::1/64 on a veth to the internet,
// default routes through it. It stands for the host the gateway runs on: HTTP on 127.0.0.1:80 and
// [::1]:80 answers `host-loopback`, on 198.18.0.1:80 and [2001:db8:ff::1]:80 `host-address`.
//
// The client (sbx-client-XXXX): lo only, no route anywhere.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "smolbox/error.h"
#include "smolbox_runner.h"
#include "test_support.h"

namespace smolbox::testing {

inline constexpr const char* kAllowedAddress = "192.0.2.10";
inline constexpr const char* kAllowedAddress6 = "2001:db8::10";
inline constexpr const char* kOtherAddress = "192.0.2.20";
inline constexpr const char* kMetadataAddress = "169.254.169.254";
inline constexpr const char* kPrivateAddress = "10.20.0.5";
inline constexpr const char* kDnsAddress = "203.0.113.53";
// The uplink's own addresses: the host's, as the gateway sees it.
inline constexpr const char* kUplinkAddress = "198.18.0.1";
inline constexpr const char* kUplinkAddress6 = "2001:db8:ff::1";

// The namespaces and servers above, for as long as it lives.
class TestInternet {
 public:
  // Builds it, or says why it cannot (not root, ip, dnsmasq, openssl or python3 missing, a
  // server that did not start, with its log). It returns once every server answers.
  static Expected<std::unique_ptr<TestInternet>> Create();
  // Stops the servers, then removes the namespaces (and with them the veth).
  ~TestInternet();
  TestInternet(const TestInternet&) = delete;
  TestInternet& operator=(const TestInternet&) = delete;

  // For smolbox's --egress-netns.
  std::string uplink_netns_path() const { return "/run/netns/" + uplink_netns(); }
  std::string uplink_netns() const { return "sbx-uplink-" + suffix_; }
  std::string client_netns() const { return "sbx-client-" + suffix_; }
  std::string internet_netns() const { return "sbx-inet-" + suffix_; }
  std::string dns_server() const { return kDnsAddress; }
  // The servers' TLS certificate (PEM), valid for the names above and the two TLS addresses.
  std::string cert_path() const { return dir_.path() + "/cert.pem"; }
  // Holds the certificate, the configuration and the logs; every server's command line names
  // it, so CountProcessesWith(state_dir()) finds them.
  const std::string& state_dir() const { return dir_.path(); }

  // argv to run inside the client or the uplink namespace: {ip, "netns", "exec", NS, argv...}.
  std::vector<std::string> InClient(const std::vector<std::string>& argv) const;
  std::vector<std::string> InUplink(const std::vector<std::string>& argv) const;
  // `smolbox ARGS` inside the client namespace, as testing::RunSmolbox runs it.
  Invocation RunSmolbox(const std::vector<std::string>& args,
                        const std::vector<std::string>& env = {}) const;
  // What every server has printed so far, each log under its name: for failure messages.
  std::string ServerLog() const;

 private:
  explicit TestInternet(std::string suffix);
  Expected<void> MakeNamespaces();
  Expected<void> LinkUplinkToInternet();
  Expected<void> MakeCertificate() const;
  Expected<void> StartServers();
  Expected<void> WaitUntilServing() const;
  Expected<void> Start(const std::string& name, const std::vector<std::string>& argv);
  void StopServers();

  struct Server {
    std::string name;  // its log is state_dir()/NAME.log
    pid_t pid;
  };

  std::string suffix_;
  TempDir dir_;
  // Only the namespaces this one added are removed: a name that clashed is another run's.
  std::vector<std::string> made_netns_;
  std::vector<Server> servers_;
};

// One test internet for all the tests of a suite: built before its first test and removed after
// its last. Each test skips, with the reason, when it could not be built.
class TestInternetTest : public ::testing::Test {
 public:
  static void SetUpTestSuite();
  static void TearDownTestSuite();

 protected:
  void SetUp() override;
  static TestInternet& internet() { return *internet_; }

 private:
  inline static std::unique_ptr<TestInternet> internet_;
  inline static std::string unavailable_;
};

}  // namespace smolbox::testing
