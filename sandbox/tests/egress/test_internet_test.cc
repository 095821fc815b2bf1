// The test internet itself, without smolbox: python clients in its namespaces show that each
// server answers where the egress tests expect it, and nowhere else.
#include "test_internet.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>

namespace smolbox::testing {
namespace {

// The suite bears the name of what it tests; in this file TestInternet is therefore the gtest
// fixture, and the class the fixture holds is spelled in full.
using TestInternet = TestInternetTest;

constexpr const char* kPython = "/usr/bin/python3";

// GET HOST PORT PATH HOST-HEADER [SNI]: plain HTTP, or TLS (unverified) with that SNI, "" for
// none. Prints the status and the body, or the body's length for /bytes/N.
constexpr const char* kFetch = R"py(
import http.client, socket, ssl, sys
host, port, path, header = sys.argv[1:5]
connection = http.client.HTTPConnection(host, int(port), timeout=5)
if len(sys.argv) > 5:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    raw = socket.create_connection((host, int(port)), timeout=5)
    connection.sock = context.wrap_socket(raw, server_hostname=sys.argv[5] or None)
connection.request("GET", path, headers={"Host": header})
response = connection.getresponse()
body = response.read()
print(response.status, len(body) if path.startswith("/bytes/") else body.decode())
)py";

// TCP connect to HOST PORT: "connected" or the errno's name.
constexpr const char* kConnect = R"py(
import errno, socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
    print("connected")
except OSError as e:
    print(errno.errorcode.get(e.errno, e))
)py";

std::string Fetch(const smolvm_check::TestInternet& net, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kPython, "-I", "-c", kFetch};
  argv.insert(argv.end(), args.begin(), args.end());
  ProgramRun run = RunProgram(net.InUplink(argv));
  return run.out + run.err;
}

std::string Query(const smolvm_check::TestInternet& net, const std::vector<std::string>& question) {
  std::vector<std::string> argv = {kPython, "-I", smolvm_check::TestInternetServersScript(), "query",
                                   kDnsAddress};
  argv.insert(argv.end(), question.begin(), question.end());
  ProgramRun run = RunProgram(net.InUplink(argv));
  return run.out + run.err;
}

TEST_F(TestInternet, every_name_resolves_from_the_uplink_to_what_the_header_lists) {
  const std::vector<std::vector<std::string>> records = {
      {"api.allowed.test", "A", "192.0.2.10"},
      {"api.allowed.test", "AAAA", "2001:db8::10"},
      {"www.allowed.test", "A", "192.0.2.10"},
      {"deep.sub.allowed.test", "A", "192.0.2.10"},
      {"other.test", "A", "192.0.2.20"},
      {"shared.test", "A", "192.0.2.10"},
      {"metadata.allowed.test", "A", "169.254.169.254"},
      {"loopback.allowed.test", "A", "127.0.0.1"},
      {"mapped.allowed.test", "AAAA", "::ffff:169.254.169.254"},
      {"private.allowed.test", "A", "10.20.0.5"},
      {"txt.allowed.test", "TXT", "exfil"},
  };
  for (const auto& record : records) {
    EXPECT_EQ(Query(internet(), {record[0], record[1]}), "NOERROR " + record[2] + "\n")
        << record[0] << " " << record[1] << "\n"
        << internet().ServerLog();
  }
}

TEST_F(TestInternet, a_name_with_only_an_a_record_has_no_aaaa) {
  EXPECT_EQ(Query(internet(), {"www.allowed.test", "AAAA"}), "NOERROR\n");
  EXPECT_EQ(Query(internet(), {"mapped.allowed.test", "A"}), "NOERROR\n");
}

TEST_F(TestInternet, every_other_name_is_nxdomain_inside_test_and_out) {
  for (const char* name : {"nope.test", "x.api.allowed.test", "example.com", "localhost"}) {
    EXPECT_EQ(Query(internet(), {name, "A"}), "NXDOMAIN\n") << name;
  }
}

TEST_F(TestInternet, answers_live_thirty_seconds) {
  EXPECT_EQ(Query(internet(), {"api.allowed.test", "A", "--ttl"}), "NOERROR 192.0.2.10 ttl=30\n");
}

TEST_F(TestInternet, the_allowed_server_answers_with_its_address_and_the_host_header) {
  EXPECT_EQ(Fetch(internet(), {kAllowedAddress, "80", "/", "api.allowed.test"}),
            "200 server=192.0.2.10 host=api.allowed.test\n")
      << internet().ServerLog();
  EXPECT_EQ(Fetch(internet(), {kAllowedAddress, "8080", "/", "shared.test"}),
            "200 server=192.0.2.10 host=shared.test\n");
}

TEST_F(TestInternet, tls_reports_the_server_name_the_client_sent) {
  EXPECT_EQ(
      Fetch(internet(), {kAllowedAddress, "443", "/", "api.allowed.test", "api.allowed.test"}),
      "200 server=192.0.2.10 sni=api.allowed.test host=api.allowed.test\n")
      << internet().ServerLog();
  EXPECT_EQ(Fetch(internet(), {kOtherAddress, "443", "/", "api.allowed.test", ""}),
            "200 server=192.0.2.20 sni=none host=api.allowed.test\n");
}

TEST_F(TestInternet, the_allowed_server_answers_over_ipv6) {
  EXPECT_EQ(Fetch(internet(), {kAllowedAddress6, "80", "/", "api.allowed.test"}),
            "200 server=2001:db8::10 host=api.allowed.test\n")
      << internet().ServerLog();
}

TEST_F(TestInternet, metadata_private_and_other_servers_answer_on_both_ports) {
  for (const char* address : {kMetadataAddress, kPrivateAddress, kOtherAddress}) {
    for (const char* port : {"80", "8080"}) {
      EXPECT_EQ(Fetch(internet(), {address, port, "/", "x"}),
                fmt::format("200 server={} host=x\n", address))
          << address << ":" << port;
    }
  }
}

TEST_F(TestInternet, bytes_n_answers_n_bytes) {
  EXPECT_EQ(Fetch(internet(), {kAllowedAddress, "80", "/bytes/0", "x"}), "200 0\n");
  EXPECT_EQ(Fetch(internet(), {kAllowedAddress, "80", "/bytes/10000000", "x"}), "200 10000000\n");
  EXPECT_EQ(Fetch(internet(), {kAllowedAddress, "80", "/bytes/1073741825", "x"}).substr(0, 4),
            "400 ");
}

TEST_F(TestInternet, udp_to_the_allowed_server_is_echoed) {
  std::string code =
      "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.settimeout(3)\n"
      "s.sendto(b'ping', ('192.0.2.10', 9999))\nprint(s.recv(100).decode())";
  EXPECT_EQ(RunProgram(internet().InUplink({kPython, "-I", "-c", code})).out, "ping\n")
      << internet().ServerLog();
}

TEST_F(TestInternet, the_uplinks_own_listeners_answer_as_the_host) {
  EXPECT_EQ(Fetch(internet(), {"127.0.0.1", "80", "/", "x"}), "200 host-loopback\n")
      << internet().ServerLog();
  EXPECT_EQ(Fetch(internet(), {"::1", "80", "/", "x"}), "200 host-loopback\n");
  EXPECT_EQ(Fetch(internet(), {kUplinkAddress, "80", "/", "x"}), "200 host-address\n");
  EXPECT_EQ(Fetch(internet(), {kUplinkAddress6, "80", "/", "x"}), "200 host-address\n");
}

TEST_F(TestInternet, the_client_namespace_reaches_nothing) {
  for (const char* address :
       {kAllowedAddress, kAllowedAddress6, kMetadataAddress, kUplinkAddress}) {
    ProgramRun run =
        RunProgram(internet().InClient({kPython, "-I", "-c", kConnect, address, "80"}));
    EXPECT_EQ(run.out, "ENETUNREACH\n") << address << " " << run.err;
  }
  ProgramRun dns = RunProgram(internet().InClient({kPython, "-I", smolvm_check::TestInternetServersScript(),
                                                   "query", kDnsAddress, "api.allowed.test", "A"}));
  EXPECT_EQ(dns.err, "error ENETUNREACH\n");
}

TEST_F(TestInternet, the_hosts_namespace_routes_no_test_address_through_the_fixture) {
  for (const char* address :
       {kAllowedAddress, kAllowedAddress6, kOtherAddress, kDnsAddress, kMetadataAddress,
        kPrivateAddress, kUplinkAddress, kUplinkAddress6, "198.18.0.2"}) {
    ProgramRun route = RunProgram({"ip", "route", "get", address});
    // Unreachable is fine too: only a route through the fixture's veth would be wrong.
    EXPECT_EQ(route.out.find("sbx"), std::string::npos) << route.out;
  }
  // Nor holds a link or an address of it.
  ProgramRun links = RunProgram({"ip", "-o", "addr", "show"});
  ASSERT_EQ(links.exit_code, 0) << "no ip on PATH? " << links.err;
  EXPECT_EQ(links.out.find("sbx"), std::string::npos) << links.out;
  EXPECT_EQ(links.out.find("198.18."), std::string::npos) << links.out;
  EXPECT_EQ(links.out.find("2001:db8:"), std::string::npos) << links.out;
}

TEST_F(TestInternet, run_smolbox_runs_the_built_binary_through_the_client_namespace) {
  Invocation run = RunSmolboxInClient({"--version"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.rfind("smolbox ", 0), 0u) << run.out << run.err;
}

TEST_F(TestInternet, destroying_it_leaves_no_namespace_process_or_file) {
  auto made = smolvm_check::TestInternet::Create();
  ASSERT_TRUE(made) << ErrorOf(made);
  const std::vector<std::string> names = {(*made)->internet_netns(), (*made)->uplink_netns(),
                                          (*made)->client_netns()};
  const std::string dir = (*made)->state_dir();
  // dnsmasq and the two python servers, each naming the directory on its command line.
  EXPECT_EQ(CountProcessesWith(dir), 3) << (*made)->ServerLog();
  made->reset();
  std::string listed = RunProgram({"ip", "netns", "list"}).out;
  for (const auto& name : names) {
    EXPECT_EQ(listed.find(name), std::string::npos) << listed;
    EXPECT_FALSE(std::filesystem::exists("/run/netns/" + name));
  }
  EXPECT_EQ(CountProcessesWith(dir), 0);
  EXPECT_FALSE(std::filesystem::exists(dir));
}

}  // namespace
}  // namespace smolbox::testing
