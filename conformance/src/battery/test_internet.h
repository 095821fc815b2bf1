// The test internet: servers in a network namespace of their own, reached only from the uplink
// namespace that an egress gateway (or, for the battery, the whole sandbox under test) runs
// in. No test address is ever routed in the host's own namespace: nothing sent to one can leave
// the machine. The egress tests and the battery's egress cases both stand on it.
//
//   auto internet = TestInternet::Create();         // needs root, ip, dnsmasq, openssl, python3
//   SMOLBOX_TRY(internet);
//   // run the code under test in (*internet)->uplink_netns_path(), with
//   // (*internet)->resolv_conf_path() as its /etc/resolv.conf
//   // ~TestInternet stops the servers and removes the namespaces
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
// (up to 1 GiB, streamed); `GET /files/PATH` answers state_dir()/files/PATH (a directory's
// index.html), which a test writes there (a package registry's documents). TLS, with a
// certificate of its own test CA (cert_path(), ca_path()), answers those the same, and any other
// request with `server=<addr> sni=<name or none> host=<Host>`.
//
// The uplink (sbx-uplink-XXXX): 198.18.0.1/30 and 2001:db8:ff::1/64 on a veth to the internet,
// default routes through it. It stands for the host the gateway runs on: HTTP on 127.0.0.1:80 and
// [::1]:80 answers `host-loopback`, on 198.18.0.1:80 and [2001:db8:ff::1]:80 `host-address`.
//
// The client (sbx-client-XXXX): lo only, no route anywhere.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "smolbox/error.h"

namespace smolvm_check {

using smolbox::Error;
using smolbox::Expected;

inline constexpr const char* kAllowedAddress = "192.0.2.10";
inline constexpr const char* kAllowedAddress6 = "2001:db8::10";
inline constexpr const char* kOtherAddress = "192.0.2.20";
inline constexpr const char* kMetadataAddress = "169.254.169.254";
inline constexpr const char* kPrivateAddress = "10.20.0.5";
inline constexpr const char* kDnsAddress = "203.0.113.53";
// The uplink's own addresses: the host's, as the gateway sees it.
inline constexpr const char* kUplinkAddress = "198.18.0.1";
inline constexpr const char* kUplinkAddress6 = "2001:db8:ff::1";

// The servers' program (servers.py): `serve` for the servers, `query` for a DNS client.
std::string TestInternetServersScript();

// The namespaces and servers above, for as long as it lives.
class TestInternet {
 public:
  // Builds it, or says why it cannot (not root, ip, dnsmasq, openssl or python3 missing, a
  // server that did not start, with its log). It returns once every server answers.
  static Expected<std::unique_ptr<TestInternet>> Create();
  // Stops the servers, then removes the namespaces (and with them the veth) and state_dir().
  ~TestInternet();
  TestInternet(const TestInternet&) = delete;
  TestInternet& operator=(const TestInternet&) = delete;

  // For smolbox's --egress-netns, and where the battery runs a sandbox under test.
  std::string uplink_netns_path() const { return "/run/netns/" + uplink_netns(); }
  std::string client_netns_path() const { return "/run/netns/" + client_netns(); }
  std::string uplink_netns() const { return "sbx-uplink-" + suffix_; }
  std::string client_netns() const { return "sbx-client-" + suffix_; }
  std::string internet_netns() const { return "sbx-inet-" + suffix_; }
  std::string dns_server() const { return kDnsAddress; }
  // A resolv.conf naming dns_server(): what a host on the uplink would have.
  std::string resolv_conf_path() const { return state_dir_ + "/resolv.conf"; }
  // The servers' TLS certificate (PEM), valid for the names above and the two TLS addresses,
  // signed by ca_path()'s CA, which this test internet made for itself.
  std::string cert_path() const { return state_dir_ + "/cert.pem"; }
  std::string ca_path() const { return state_dir_ + "/ca.pem"; }
  // Holds the certificate, the configuration and the logs; every server's command line names
  // it, so a scan of /proc for it finds them.
  const std::string& state_dir() const { return state_dir_; }

  // argv to run inside the client or the uplink namespace: {ip, "netns", "exec", NS, argv...}.
  std::vector<std::string> InClient(const std::vector<std::string>& argv) const;
  std::vector<std::string> InUplink(const std::vector<std::string>& argv) const;
  // What every server has printed so far, each log under its name: for failure messages.
  std::string ServerLog() const;

 private:
  TestInternet(std::string suffix, std::string state_dir);
  Expected<void> MakeNamespaces();
  Expected<void> LinkUplinkToInternet();
  Expected<void> WriteConfiguration() const;
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
  std::string state_dir_;
  // Only the namespaces this one added are removed: a name that clashed is another run's.
  std::vector<std::string> made_netns_;
  std::vector<Server> servers_;
};

}  // namespace smolvm_check
