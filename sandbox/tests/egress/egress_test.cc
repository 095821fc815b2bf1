// Egress through the gateway, on the ns backend and on the vm backend under TCG, against the
// test internet (test_internet.h): smolbox runs in a namespace with nothing but loopback and
// dials from the test's uplink, so nothing here can reach past this machine even if the gateway
// were wrong.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "egress_probe.h"
#include "test_internet.h"

namespace smolbox::testing {
namespace {

constexpr const char* kPython = "/usr/bin/python3";
constexpr uid_t kNobody = 65534;

// The probe's lines.
std::vector<std::string> Lines(const Invocation& run) {
  if (!run.result.is_object()) return {"no result: exit " + std::to_string(run.exit_code) + ": " + run.out + run.err};
  std::vector<std::string> lines;
  std::string out = run.result.value("stdout", "");
  for (size_t at = 0; at < out.size();) {
    size_t end = out.find('\n', at);
    lines.push_back(out.substr(at, end - at));
    at = end == std::string::npos ? out.size() : end + 1;
  }
  return lines;
}
// The result's egress events of one kind, for a given address or name.
std::vector<nlohmann::json> Events(const Invocation& run, const std::string& kind) {
  std::vector<nlohmann::json> out;
  if (!run.result.is_object()) return out;
  for (const auto& e : run.result.value("egress", nlohmann::json::array())) {
    if (e.value("kind", "") == kind) out.push_back(e);
  }
  return out;
}
std::string Describe(const Invocation& run) { return run.out + "\n" + run.err; }

// The backend's flags, for each case's instantiation.
std::vector<std::string> BackendFlags(const std::string& backend) {
  if (backend == "vm_tcg") return {"--backend", "vm", "--accel", "tcg"};
  return {"--backend", backend};
}

class Egress : public TestInternetTest, public ::testing::WithParamInterface<std::string> {
 protected:
  static std::vector<std::string> Backend() { return BackendFlags(GetParam()); }
  // `smolbox run --json` with options, the uplink and the test DNS, of the probe with steps.
  Invocation Probe(std::vector<std::string> options, const std::string& steps) {
    std::vector<std::string> args = {"run", "--json"};
    for (const std::string& flag : Backend()) args.push_back(flag);
    for (const std::string& flag : {std::string("--timeout"), std::string("60s"),
                                    std::string("--egress-netns"), internet().uplink_netns_path(),
                                    std::string("--dns-server"), internet().dns_server()})
      args.push_back(flag);
    args.insert(args.end(), options.begin(), options.end());
    for (const std::string& a : std::vector<std::string>{"--", kPython, "-c", kEgressProbe, steps})
      args.push_back(a);
    return RunSmolboxInClient(args);
  }
};

TEST_P(Egress, without_any_flag_the_sandbox_has_no_network_and_no_names) {
  auto run = Probe({}, "resolve api.allowed.test / connect 192.0.2.10 80");
  ASSERT_EQ(run.result.value("status", ""), "exited") << Describe(run);
  EXPECT_EQ(Lines(run), (std::vector<std::string>{"gaierror -2", "ENETUNREACH"}));
  EXPECT_TRUE(run.result["egress"].empty());
}

TEST_P(Egress, an_allowed_name_is_fetched_and_the_result_lists_the_query_and_the_connection) {
  auto run =
      Probe({"--allow-host", "api.allowed.test"}, "fetch api.allowed.test 80 api.allowed.test");
  ASSERT_EQ(run.result.value("status", ""), "exited") << Describe(run);
  EXPECT_EQ(Lines(run), (std::vector<std::string>{"200 server=192.0.2.10 host=api.allowed.test"}))
      << Describe(run) << internet().ServerLog();
  auto tcp = Events(run, "tcp");
  ASSERT_EQ(tcp.size(), 1u) << run.result["egress"].dump(2);
  EXPECT_TRUE(tcp[0]["allowed"].get<bool>());
  EXPECT_EQ(tcp[0]["address"], "192.0.2.10");
  EXPECT_EQ(tcp[0]["port"], 80);
  EXPECT_EQ(tcp[0]["name"], "api.allowed.test");
  EXPECT_GT(tcp[0]["bytes_out"].get<int64_t>(), 0);
  EXPECT_GT(tcp[0]["bytes_in"].get<int64_t>(), 0);
  bool answered = false;
  for (const auto& q : Events(run, "dns")) {
    answered |= q["name"] == "api.allowed.test" && q["type"] == "A" && q["allowed"] == true &&
                q["address"] == "192.0.2.10";
  }
  EXPECT_TRUE(answered) << run.result["egress"].dump(2);
}

TEST_P(Egress, an_allowed_name_is_fetched_over_ipv6_and_over_tls_with_its_own_server_name) {
  auto run = Probe({"--allow-host", "api.allowed.test"},
                   "fetch 2001:db8::10 80 api.allowed.test / fetch api.allowed.test 443 "
                   "api.allowed.test api.allowed.test");
  // The literal IPv6 address was never resolved through the gateway, so it opens nothing; the
  // name's own fetch over TLS passes.
  ASSERT_EQ(Lines(run).size(), 2u) << Describe(run);
  EXPECT_EQ(Lines(run)[0], "ECONNRESET");
  EXPECT_EQ(Lines(run)[1], "200 server=192.0.2.10 sni=api.allowed.test host=api.allowed.test");
  auto run6 = Probe({"--allow-host", "api.allowed.test"},
                    "resolve api.allowed.test / fetch 2001:db8::10 80 api.allowed.test");
  EXPECT_EQ(Lines(run6),
            (std::vector<std::string>{"192.0.2.10 2001:db8::10",
                                      "200 server=2001:db8::10 host=api.allowed.test"}))
      << Describe(run6);
}

TEST_P(Egress, another_name_gets_nxdomain_and_an_ip_literal_of_a_server_not_allowed_is_refused) {
  auto run = Probe({"--allow-host", "api.allowed.test"},
                   "resolve other.test / connect 192.0.2.20 80 / resolve www.allowed.test");
  EXPECT_EQ(Lines(run), (std::vector<std::string>{"gaierror -2", "ECONNRESET", "gaierror -2"}))
      << Describe(run);
  auto tcp = Events(run, "tcp");
  ASSERT_EQ(tcp.size(), 1u);
  EXPECT_FALSE(tcp[0]["allowed"].get<bool>());
  EXPECT_EQ(tcp[0]["address"], "192.0.2.20");
  EXPECT_NE(tcp[0]["reason"].get<std::string>().find("matches no rule"), std::string::npos)
      << tcp[0].dump();
}

TEST_P(Egress, a_wildcard_covers_subdomains_only_and_an_allowed_name_on_another_port_is_refused) {
  auto run = Probe({"--allow-host", "*.allowed.test:80"},
                   "fetch deep.sub.allowed.test 80 deep.sub.allowed.test / fetch www.allowed.test "
                   "8080 www.allowed.test / resolve allowed.test");
  EXPECT_EQ(Lines(run),
            (std::vector<std::string>{"200 server=192.0.2.10 host=deep.sub.allowed.test",
                                      "ECONNRESET", "gaierror -2"}))
      << Describe(run);
}

TEST_P(Egress, a_name_that_resolves_into_the_floor_is_refused_as_rebinding) {
  auto run = Probe({"--allow-host", "*.allowed.test"},
                   "resolve metadata.allowed.test / resolve loopback.allowed.test / resolve "
                   "mapped.allowed.test / connect 169.254.169.254 80");
  // The refused A (or AAAA) and the empty other leave getaddrinfo with no address: EAI_NODATA.
  EXPECT_EQ(Lines(run),
            (std::vector<std::string>{"gaierror -5", "gaierror -5", "gaierror -5", "ECONNRESET"}))
      << Describe(run);
  int rebinding = 0;
  for (const auto& q : Events(run, "dns")) {
    rebinding +=
        !q["allowed"].get<bool>() && q["reason"].get<std::string>().starts_with("rebinding");
  }
  EXPECT_GE(rebinding, 3) << run.result["egress"].dump(2);
}

TEST_P(Egress,
       with_net_the_floor_still_holds_in_every_spelling_and_private_ranges_need_allow_cidr) {
  auto run = Probe({"--net"},
                   "fetch api.allowed.test 80 api.allowed.test / connect 169.254.169.254 80 / "
                   "connect ::ffff:169.254.169.254 80 / "
                   "connect 64:ff9b::a9fe:a9fe 80 / connect 198.18.0.1 80 / connect "
                   "::ffff:198.18.0.1 80 / connect 0.0.0.0 80 / "
                   "connect 10.20.0.5 80 / connect 192.0.2.20 80");
  // 0.0.0.0 is the sandbox's own host to its kernel: the connection stays on its loopback,
  // where nothing listens.
  EXPECT_EQ(Lines(run), (std::vector<std::string>{
                            "200 server=192.0.2.10 host=api.allowed.test", "ECONNRESET",
                            "ECONNRESET", "ECONNRESET", "ECONNRESET", "ECONNRESET", "ECONNREFUSED",
                            "ECONNRESET", "connected server=192.0.2.20 host=x"}))
      << Describe(run);
  auto allowed = Probe({"--net", "--allow-cidr", "10.20.0.0/16:80"}, "connect 10.20.0.5 80");
  EXPECT_EQ(Lines(allowed), (std::vector<std::string>{"connected server=10.20.0.5 host=x"}))
      << Describe(allowed);
  auto denied = Probe({"--net", "--deny-cidr", "192.0.2.0/24"}, "connect 192.0.2.20 80");
  EXPECT_EQ(Lines(denied), (std::vector<std::string>{"ECONNRESET"})) << Describe(denied);
}

TEST_P(Egress, an_allowed_address_reached_with_another_name_in_sni_or_host_is_refused) {
  auto run = Probe({"--allow-host", "api.allowed.test"},
                   "resolve api.allowed.test / fetch 192.0.2.10 80 shared.test / fetch 192.0.2.10 "
                   "443 api.allowed.test other.test / "
                   "fetch 192.0.2.10 80 api.allowed.test");
  ASSERT_EQ(Lines(run).size(), 4u) << Describe(run);
  EXPECT_EQ(Lines(run)[1], "ECONNRESET");
  EXPECT_NE(Lines(run)[2].find("ECONNRESET"), std::string::npos) << Lines(run)[2];
  EXPECT_EQ(Lines(run)[3], "200 server=192.0.2.10 host=api.allowed.test");
  std::string reasons;
  for (const auto& c : Events(run, "tcp")) reasons += c["reason"].get<std::string>() + "\n";
  EXPECT_NE(reasons.find("HTTP host shared.test is not an allowed host"), std::string::npos)
      << reasons;
  EXPECT_NE(reasons.find("TLS server name other.test is not an allowed host"), std::string::npos)
      << reasons;
}

TEST_P(Egress, udp_a_txt_query_and_a_query_straight_to_the_upstream_are_refused) {
  auto run = Probe({"--allow-host", "*.allowed.test"},
                   "udp 192.0.2.10 9999 / dns 127.0.0.1 txt.allowed.test TXT / dns 203.0.113.53 "
                   "api.allowed.test A / "
                   "dns 127.0.0.1 api.allowed.test A");
  EXPECT_EQ(Lines(run),
            (std::vector<std::string>{"EPERM", "REFUSED answers=0", "EPERM", "NOERROR answers=1"}))
      << Describe(run);
}

TEST_P(Egress, a_connection_straight_to_the_gateways_listener_is_refused_as_loopback) {
  auto run = Probe({"--net"}, "listeners");
  // The TCP listeners for IPv4 and IPv6; nothing else listens on the sandbox's loopback.
  EXPECT_EQ(Lines(run), (std::vector<std::string>{"2: ECONNRESET ECONNRESET"})) << Describe(run);
  int loopback = 0;
  for (const auto& c : Events(run, "tcp")) {
    loopback += !c["allowed"].get<bool>() &&
                c["reason"].get<std::string>().find("loopback") != std::string::npos;
  }
  EXPECT_EQ(loopback, 2) << run.result["egress"].dump(2);
}

TEST_P(Egress, the_connection_cap_holds) {
  auto run =
      Probe({"--allow-cidr", "192.0.2.10/32", "--net-connections", "3"}, "hold 192.0.2.10 80 5");
  EXPECT_EQ(Lines(run), (std::vector<std::string>{"held 3 of 5"})) << Describe(run);
  int capped = 0;
  for (const auto& c : Events(run, "tcp"))
    capped += c["reason"].get<std::string>().find("cap of 3") != std::string::npos;
  EXPECT_EQ(capped, 2) << run.result["egress"].dump(2);
}

TEST_P(Egress, net_limit_cuts_the_bytes_out_and_says_so) {
  auto run =
      Probe({"--allow-cidr", "192.0.2.10/32", "--net-limit", "4K"}, "post 192.0.2.10 80 65536");
  ASSERT_EQ(Lines(run).size(), 1u) << Describe(run);
  EXPECT_NE(Lines(run)[0], "200");
  EXPECT_NE(std::find(run.result["limits_hit"].begin(), run.result["limits_hit"].end(), "net"),
            run.result["limits_hit"].end())
      << run.result.dump(2);
}

TEST_P(Egress, bad_egress_input_is_refused_naming_the_flag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--allow-cidr", "10.0.0.0/33"}, "--allow-cidr"},
      {{"--allow-cidr", "10.0.0.1/8"}, "--allow-cidr"},
      {{"--allow-host", "api.allowed.test:0"}, "--allow-host"},
      {{"--allow-host", "192.0.2.10"}, "--allow-host"},
      {{"--deny-cidr", "nonsense"}, "--deny-cidr"},
      {{"--dns-server", "203.0.113.53:0"}, "--dns-server"},
      {{"--net", "--egress-netns", "/run/netns/no-such-netns"}, "--egress-netns"},
      {{"--net", "--egress-netns", "/etc/hostname"}, "--egress-netns"},
      {{"--net", "--net-connections", "0"}, "--net-connections"},
      {{"--net", "--net-limit", "0"}, "--net-limit"},
  };
  for (const auto& [flags, named] : cases) {
    std::vector<std::string> args = {"run"};
    for (const std::string& flag : Backend()) args.push_back(flag);
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--", "/bin/true"});
    auto run = RunSmolboxInClient(args);
    EXPECT_EQ(run.exit_code, 125) << flags[0] << " " << flags[1];
    EXPECT_NE(run.err.find(named), std::string::npos) << flags[1] << ": " << run.err;
  }
}

TEST_P(Egress, a_persistent_sandbox_keeps_its_policy_and_each_exec_lists_its_own_connections) {
  std::string name = "egress-" + RandomToken().substr(0, 8);
  std::vector<std::string> create = {"create", name};
  for (const std::string& flag : Backend()) create.push_back(flag);
  for (const std::string& flag :
       {std::string("--allow-host"), std::string("api.allowed.test"), std::string("--egress-netns"),
        internet().uplink_netns_path(), std::string("--dns-server"), internet().dns_server()})
    create.push_back(flag);
  auto created = RunSmolboxInClient(create);
  ASSERT_EQ(created.exit_code, 0) << created.err;
  auto exec = [&](const std::string& steps) {
    return RunSmolboxInClient(
        {"exec", "--json", name, "--", kPython, "-c", kEgressProbe, steps});
  };
  auto first = exec("fetch api.allowed.test 80 api.allowed.test");
  auto second = exec("resolve other.test / connect 192.0.2.20 80");
  RunSmolboxInClient({"rm", "-f", name});
  EXPECT_EQ(Lines(first), (std::vector<std::string>{"200 server=192.0.2.10 host=api.allowed.test"}))
      << Describe(first);
  EXPECT_EQ(Lines(second), (std::vector<std::string>{"gaierror -2", "ECONNRESET"}))
      << Describe(second);
  ASSERT_EQ(Events(first, "tcp").size(), 1u);
  EXPECT_TRUE(Events(first, "tcp")[0]["allowed"].get<bool>());
  ASSERT_EQ(Events(second, "tcp").size(), 1u) << second.result["egress"].dump(2);
  EXPECT_FALSE(Events(second, "tcp")[0]["allowed"].get<bool>());
}

// HTTPS as clients make it, verification on. The test internet's CA is no public one: python's
// urllib and node's https refuse the allowed name's certificate until --ca-bundle adds that CA to
// the sandbox's store, and then fetch it through --allow-host without a flag of their own.
TEST_P(Egress, https_verifies_with_the_ca_bundle_in_the_store_and_fails_without_it) {
  constexpr const char* kPythonGet =
      "import urllib.request\n"
      "try:\n"
      "    print(urllib.request.urlopen('https://api.allowed.test/', timeout=30).read().decode())\n"
      "except Exception as e:\n"
      "    print('FAILED', e)\n";
  constexpr const char* kNodeGet =
      "require('https').get('https://api.allowed.test/', r => { let b = ''; r.on('data', d => b += d);"
      " r.on('end', () => console.log(b)); }).on('error', e => console.log('FAILED', e.code));";
  auto run = [&](const std::vector<std::string>& ca, const std::vector<std::string>& argv) {
    std::vector<std::string> args = {"run", "--json"};
    for (const std::string& flag : Backend()) args.push_back(flag);
    for (const std::string& flag : {std::string("--timeout"), std::string("60s"), std::string("--allow-host"),
                                    std::string("api.allowed.test"), std::string("--egress-netns"),
                                    internet().uplink_netns_path(), std::string("--dns-server"), internet().dns_server()})
      args.push_back(flag);
    args.insert(args.end(), ca.begin(), ca.end());
    args.push_back("--");
    args.insert(args.end(), argv.begin(), argv.end());
    return RunSmolboxInClient(args);
  };
  const std::vector<std::string> with_ca = {"--ca-bundle", internet().ca_path()};
  const std::string answer = "server=192.0.2.10 sni=api.allowed.test host=api.allowed.test";
  auto python = run(with_ca, {kPython, "-c", kPythonGet});
  EXPECT_EQ(Lines(python), (std::vector<std::string>{answer})) << Describe(python) << internet().ServerLog();
  auto node = run(with_ca, {"/usr/bin/node", "-e", kNodeGet});
  EXPECT_EQ(Lines(node), (std::vector<std::string>{answer})) << Describe(node);
  auto python_without = run({}, {kPython, "-c", kPythonGet});
  ASSERT_EQ(Lines(python_without).size(), 1u) << Describe(python_without);
  EXPECT_NE(Lines(python_without)[0].find("CERTIFICATE_VERIFY_FAILED"), std::string::npos) << Describe(python_without);
  auto node_without = run({}, {"/usr/bin/node", "-e", kNodeGet});
  EXPECT_EQ(Lines(node_without), (std::vector<std::string>{"FAILED UNABLE_TO_VERIFY_LEAF_SIGNATURE"})) << Describe(node_without);
}

// The seeds' package-manager workflow: the real npm and pip from Debian install into a project
// mounted rw, through --allow-host, over HTTPS verified by the test CA, from a minimal npm
// registry and PyPI simple index on the test internet (make_registries.py).
TEST_P(Egress, npm_and_pip_install_into_the_project_from_registries_over_https) {
  const std::string files = internet().state_dir() + "/files";
  const std::string base = "https://api.allowed.test/files";
  auto made = RunProgram({kPython, std::string(SMOLBOX_EGRESS_TEST_DIR) + "/make_registries.py", files, base});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  TempDir project("egress-project");
  WriteFile(project.path() + "/package.json", R"({"name": "proj", "version": "1.0.0"})");
  chmod(project.path().c_str(), 0777);  // the sandbox's user writes node_modules and lib there
  auto run = [&](const std::vector<std::string>& argv) {
    std::vector<std::string> args = {"run", "--json"};
    for (const std::string& flag : Backend()) args.push_back(flag);
    for (const std::string& flag : {std::string("--timeout"), std::string("120s"), std::string("--allow-host"),
                                    std::string("api.allowed.test"), std::string("--egress-netns"),
                                    internet().uplink_netns_path(), std::string("--dns-server"), internet().dns_server(),
                                    std::string("--ca-bundle"), internet().ca_path(), std::string("-v"),
                                    project.path() + ":/work", std::string("-e"), std::string("HOME=/tmp")})
      args.push_back(flag);
    args.push_back("--");
    args.insert(args.end(), argv.begin(), argv.end());
    return RunSmolboxInClient(args);
  };
  auto npm = run({"/usr/bin/npm", "install", "--registry", base + "/npm/", "--no-audit", "--no-fund", "--cache",
                  "/tmp/npm-cache", "smolpad"});
  ASSERT_EQ(npm.result.value("exit_code", -1), 0) << Describe(npm) << internet().ServerLog();
  EXPECT_NE(ReadFileOrEmpty(project.path() + "/node_modules/smolpad/index.js").find("padStart"), std::string::npos);
  EXPECT_NE(ReadFileOrEmpty(project.path() + "/package.json").find("\"smolpad\""), std::string::npos)
      << "npm install records the dependency in the project";
  auto pip = run({kPython, "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check", "--index-url",
                  base + "/pypi/simple/", "--target", "/work/lib", "smolpkg"});
  ASSERT_EQ(pip.result.value("exit_code", -1), 0) << Describe(pip) << internet().ServerLog();
  EXPECT_NE(ReadFileOrEmpty(project.path() + "/lib/smolpkg/__init__.py").find("def pad"), std::string::npos);
  // And what they installed runs, from the project.
  auto used = run({"/bin/sh", "-c",
                   "cd /work && /usr/bin/node -e \"console.log(require('smolpad')(7, 3))\" && "
                   "PYTHONPATH=/work/lib /usr/bin/python3 -c 'import smolpkg; print(smolpkg.pad(8, 3))'"});
  EXPECT_EQ(Lines(used), (std::vector<std::string>{"..7", "..8"})) << Describe(used);
}

// The host image carries the host's CA trust store read-only (the vm's, as its rootfs was built
// from this host), and no private key directory with it.
TEST_P(Egress, the_host_image_has_the_hosts_ca_store_read_only_and_no_private_keys) {
  constexpr const char* kBundle = "/etc/ssl/certs/ca-certificates.crt";
  if (access(kBundle, R_OK) != 0) GTEST_SKIP() << "this host has no " << kBundle;
  std::vector<std::string> args = {"run", "--json"};
  for (const std::string& flag : Backend()) args.push_back(flag);
  const std::string code =
      "import hashlib, os, ssl\n"
      "print(hashlib.sha256(open('/etc/ssl/certs/ca-certificates.crt', 'rb').read()).hexdigest())\n"
      "print(ssl.create_default_context().cert_store_stats()['x509_ca'] > 0, os.path.exists('/etc/ssl/private'))\n"
      "print([l.split()[5].split(',')[0] for l in open('/proc/self/mountinfo') if l.split()[4] == '/etc/ssl/certs'])\n";
  for (const std::string& word : {std::string("--"), std::string(kPython), std::string("-c"), code}) args.push_back(word);
  auto run = RunSmolboxInClient(args);
  ProgramRun host = RunProgram({"/usr/bin/sha256sum", kBundle});
  EXPECT_EQ(Lines(run), (std::vector<std::string>{host.out.substr(0, 64), "True False", "['ro']"}))
      << Describe(run);
}

INSTANTIATE_TEST_SUITE_P(Backends, Egress, ::testing::Values("ns", "vm_tcg"),
                         [](const auto& instance) { return instance.param; });

// The ns sandbox's connections all run over its loopback, to the gateway's listener: there, a
// pacing congestion control such as BBR, this host's default, cost a quarter of a download's
// throughput. The workload's end uses Reno, and so does the namespace's default, which the
// gateway's end takes when it is accepted; setting it leaves no warning.
class EgressNs : public TestInternetTest {};

TEST_F(EgressNs, connections_through_the_gateway_use_reno_whatever_the_host_default) {
  constexpr const char* kCongestionControl =
      "import socket\n"
      "s = socket.create_connection(('api.allowed.test', 80), timeout=30)\n"
      "print(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b'\\0').decode())\n"
      "print(open('/proc/sys/net/ipv4/tcp_congestion_control').read().strip())\n";
  auto run = RunSmolboxInClient({"run", "--json", "--backend", "ns", "--timeout", "60s", "--egress-netns",
                                 internet().uplink_netns_path(), "--dns-server", internet().dns_server(),
                                 "--allow-host", "api.allowed.test", "--", kPython, "-c", kCongestionControl});
  ASSERT_EQ(run.result.value("status", ""), "exited") << Describe(run);
  EXPECT_EQ(Lines(run), (std::vector<std::string>{"reno", "reno"})) << Describe(run);
  EXPECT_EQ(run.result["warnings"], nlohmann::json::array()) << Describe(run);
}

// Rootless is the ns backend's alone: the vm backend needs root in this build.
class EgressRootless : public TestInternetTest {};

TEST_F(EgressRootless, an_unprivileged_user_gets_egress_through_its_own_namespace_as_the_uplink) {
  // Rootless, smolbox cannot enter another namespace: it runs in the uplink itself, and its
  // gateway dials from there. The thread's namespace is what RunSmolbox's child inherits.
  Invocation run;
  std::thread in_uplink([&] {
    int netns = open(internet().uplink_netns_path().c_str(), O_RDONLY | O_CLOEXEC);
    if (netns < 0 || setns(netns, CLONE_NEWNET) != 0) return;
    close(netns);
    run = RunSmolbox({"run", "--json", "--backend", "ns", "--allow-host", "api.allowed.test", "--dns-server",
                      internet().dns_server(), "--", kPython, "-c", kEgressProbe,
                      "fetch api.allowed.test 80 api.allowed.test / connect 192.0.2.20 80 / connect 198.18.0.1 80"},
                     {}, kNobody);
  });
  in_uplink.join();
  ASSERT_EQ(run.result.value("status", ""), "exited") << Describe(run);
  EXPECT_EQ(Lines(run), (std::vector<std::string>{"200 server=192.0.2.10 host=api.allowed.test", "ECONNRESET", "ECONNRESET"}))
      << Describe(run);
  // The unprivileged setup could set its namespace's congestion control too.
  for (const auto& warning : run.result["warnings"])
    EXPECT_EQ(warning.get<std::string>().find("congestion control"), std::string::npos) << warning;
}

}  // namespace
}  // namespace smolbox::testing
