#include "battery/test_internet.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <utility>

#include "launch/host_files.h"
#include "launch/subprocess.h"

namespace smolvm_check {
namespace {

constexpr const char* kPython = "/usr/bin/python3";
constexpr const char* kDnsmasq = "/usr/sbin/dnsmasq";
// The internet's end of the veth: the uplink routes everything through it.
constexpr const char* kInternetEnd = "198.18.0.2";
constexpr const char* kInternetEnd6 = "2001:db8:ff::2";
constexpr auto kStartLimit = std::chrono::seconds(10);

// A full path: ip lives in /usr/sbin, which a caller's PATH may lack.
const std::string& IpPath() {
  static const std::string path = [] {
    for (const char* candidate : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
      if (access(candidate, X_OK) == 0) return std::string(candidate);
    }
    return std::string();
  }();
  return path;
}

std::vector<std::string> InNetns(const std::string& netns, const std::vector<std::string>& argv) {
  std::vector<std::string> full = {IpPath(), "netns", "exec", netns};
  full.insert(full.end(), argv.begin(), argv.end());
  return full;
}

// `ip -n NETNS ARGS`: one netlink request into that namespace, no process in it.
std::vector<std::string> IpIn(const std::string& netns, const std::vector<std::string>& args) {
  std::vector<std::string> full = {IpPath(), "-n", netns};
  full.insert(full.end(), args.begin(), args.end());
  return full;
}

// A missing prerequisite: the skip message says "no test internet: WHY".
Error Unavailable(std::string why) { return Error{"", std::move(why), 0}; }

// A fixed environment for every program started here: the caller's own (a pyenv PATH, a
// PYTHONPATH) must not change the servers or the setup.
CaptureOptions FixedEnvironment() {
  CaptureOptions options;
  options.extra_env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  options.only_extra_env = true;
  return options;
}

// One setup step: its failure names the command and what the command said.
Expected<void> Run(const std::vector<std::string>& argv) {
  SMOLBOX_ASSIGN_OR_RETURN(Captured run,
                           RunCaptured(argv, FixedEnvironment()));
  if (run.exit_code == 0) return {};
  return std::unexpected(Error{fmt::format("{}", fmt::join(argv, " ")),
                               fmt::format("exit {}: {}{}", run.exit_code, run.err, run.out), 0});
}

std::string Output(const std::vector<std::string>& argv) {
  auto run = RunCaptured(argv, FixedEnvironment());
  return run ? run->out : "";
}

bool Running(pid_t pid) {
  // The state follows the last ')': the command name before it may hold any character.
  std::string stat = ReadUpTo("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  return close != std::string::npos && stat.size() > close + 2 && stat[close + 2] != 'Z' &&
         stat[close + 2] != 'X';
}

template <typename Condition>
bool WaitUntil(Condition condition, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

Expected<void> CheckPrerequisites() {
  if (geteuid() != 0) return std::unexpected(Unavailable("needs root, for network namespaces"));
  if (IpPath().empty()) return std::unexpected(Unavailable("no ip (iproute2)"));
  const std::string script = TestInternetServersScript();
  for (const std::string& file : {std::string(kPython), std::string(kDnsmasq), script}) {
    if (access(file.c_str(), R_OK) != 0) return std::unexpected(Unavailable("no " + file));
  }
  if (access("/usr/bin/openssl", X_OK) != 0) return std::unexpected(Unavailable("no /usr/bin/openssl"));
  return {};
}

// Eight hex digits: interface names (sbxi-XXXXXXXX) must stay within 15 characters.
std::string Suffix() {
  std::random_device random;
  return fmt::format("{:08x}", random());
}

// Each name resolves to exactly what is written here. local=/#/ answers every other name
// NXDOMAIN without forwarding it; local=/test/ alone would leave names outside .test REFUSED.
std::string DnsmasqConfig() {
  return fmt::format(
      "host-record=api.allowed.test,{allowed},{allowed6}\n"
      "host-record=www.allowed.test,{allowed}\n"
      "host-record=deep.sub.allowed.test,{allowed}\n"
      "host-record=other.test,{other}\n"
      "host-record=shared.test,{allowed}\n"
      "host-record=metadata.allowed.test,{metadata}\n"
      "host-record=loopback.allowed.test,127.0.0.1\n"
      "host-record=mapped.allowed.test,::ffff:{metadata}\n"
      "host-record=private.allowed.test,{private}\n"
      "txt-record=txt.allowed.test,exfil\n"
      "local=/#/\n",
      fmt::arg("allowed", kAllowedAddress), fmt::arg("allowed6", kAllowedAddress6),
      fmt::arg("other", kOtherAddress), fmt::arg("metadata", kMetadataAddress),
      fmt::arg("private", kPrivateAddress));
}

std::vector<std::string> DnsmasqArgv(const std::string& dir) {
  // --no-daemon keeps it our child, writes no pid file and never changes its uid; the files it
  // could still write are pointed into dir, so that nothing lands in /var.
  return {kDnsmasq,
          "--conf-file=" + dir + "/dnsmasq.conf",
          "--no-daemon",
          "--no-resolv",
          "--no-hosts",
          "--bind-interfaces",
          fmt::format("--listen-address={}", kDnsAddress),
          "--port=53",
          "--local-ttl=30",
          "--pid-file=" + dir + "/dnsmasq.pid",
          "--dhcp-leasefile=" + dir + "/dnsmasq.leases",
          "--log-facility=-",
          "--log-queries"};
}

std::vector<std::string> InternetServersArgv(const std::string& dir) {
  std::vector<std::string> argv = {kPython, "-u", TestInternetServersScript(), "serve", "--state", dir};
  auto add = [&](const char* kind, const std::string& address, int port) {
    argv.insert(argv.end(), {kind, fmt::format("{}:{}", address, port)});
  };
  for (std::string address : {kAllowedAddress, kOtherAddress, kMetadataAddress, kPrivateAddress}) {
    add("--http", address, 80);
    add("--http", address, 8080);
  }
  add("--http", fmt::format("[{}]", kAllowedAddress6), 80);
  add("--http", fmt::format("[{}]", kAllowedAddress6), 8080);
  add("--tls", kAllowedAddress, 443);
  add("--tls", kOtherAddress, 443);
  add("--udp-echo", kAllowedAddress, 9999);
  return argv;
}

std::vector<std::string> UplinkServersArgv(const std::string& dir) {
  return {kPython,
          "-u",
          TestInternetServersScript(),
          "serve",
          "--state",
          dir,
          "--answer",
          "127.0.0.1:80=host-loopback",
          "--answer",
          "[::1]:80=host-loopback",
          "--answer",
          fmt::format("{}:80=host-address", kUplinkAddress),
          "--answer",
          fmt::format("[{}]:80=host-address", kUplinkAddress6)};
}

// The servers outlive any one call, so RunCaptured, which waits, cannot start them. The child
// leads a process group of its own, for StopServers to kill all of it.
Expected<pid_t> Spawn(const std::vector<std::string>& argv, const std::string& log_path) {
  std::vector<char*> args;
  for (const auto& word : argv) args.push_back(const_cast<char*>(word.c_str()));
  args.push_back(nullptr);
  char path[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";  // as FixedEnvironment(), before the fork
  char* envp[] = {path, nullptr};
  int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t pid = log >= 0 && null_fd >= 0 ? fork() : -1;
  if (pid == 0) {
    setpgid(0, 0);
    dup2(null_fd, 0);
    dup2(log, 1);
    dup2(log, 2);
    execve(args[0], args.data(), envp);
    _exit(127);
  }
  int failure = errno;
  if (pid > 0) setpgid(pid, pid);  // as the child does: whichever runs first, kill(-pid) works
  for (int fd : {log, null_fd}) {
    if (fd >= 0) close(fd);
  }
  if (pid < 0)
    return std::unexpected(Error::Sys("start " + argv[0] + " logging to " + log_path, failure));
  return pid;
}

// Whether dnsmasq answers from the uplink: which also shows the uplink's route to the internet.
bool DnsAnswers(const std::vector<std::string>& query) {
  return Output(query) == fmt::format("NOERROR {}\n", kAllowedAddress);
}

}  // namespace

std::string TestInternetServersScript() {
  return std::string(SMOLVM_CHECK_SOURCE_DIR) + "/conformance/test_internet/servers.py";
}

TestInternet::TestInternet(std::string suffix, std::string state_dir)
    : suffix_(std::move(suffix)), state_dir_(std::move(state_dir)) {}

Expected<std::unique_ptr<TestInternet>> TestInternet::Create() {
  SMOLBOX_TRY(CheckPrerequisites());
  char dir[] = "/tmp/sbx-inet-XXXXXX";
  if (!mkdtemp(dir)) return std::unexpected(Error::Sys("mkdtemp /tmp/sbx-inet-XXXXXX"));
  std::unique_ptr<TestInternet> internet(new TestInternet(Suffix(), dir));
  // A step that fails leaves what the ones before it made to the destructor.
  SMOLBOX_TRY(internet->MakeNamespaces());
  SMOLBOX_TRY(internet->LinkUplinkToInternet());
  SMOLBOX_TRY(internet->WriteConfiguration());
  SMOLBOX_TRY(internet->MakeCertificate());
  SMOLBOX_TRY(internet->StartServers());
  SMOLBOX_TRY(internet->WaitUntilServing());
  return internet;
}

TestInternet::~TestInternet() {
  // The servers first: a namespace is only gone once no process is left in it.
  StopServers();
  for (auto netns = made_netns_.rbegin(); netns != made_netns_.rend(); ++netns) {
    (void)Run({IpPath(), "netns", "del", *netns});
  }
  std::error_code ignored;
  std::filesystem::remove_all(state_dir_, ignored);
}

Expected<void> TestInternet::MakeNamespaces() {
  for (const std::string& netns : {internet_netns(), uplink_netns(), client_netns()}) {
    SMOLBOX_TRY(Run({IpPath(), "netns", "add", netns}));
    made_netns_.push_back(netns);
    SMOLBOX_TRY(Run(IpIn(netns, {"link", "set", "lo", "up"})));
  }
  return {};
}

Expected<void> TestInternet::LinkUplinkToInternet() {
  const std::string internet_end = "sbxi-" + suffix_, uplink_end = "sbxu-" + suffix_;
  // Both ends made in their namespaces at once: the veth never exists in the host's, not even
  // for a moment.
  SMOLBOX_TRY(Run({IpPath(), "link", "add", internet_end, "netns", internet_netns(), "type", "veth",
                   "peer", "name", uplink_end, "netns", uplink_netns()}));
  for (std::string address :
       {kAllowedAddress, kOtherAddress, kDnsAddress, kMetadataAddress, kPrivateAddress}) {
    SMOLBOX_TRY(Run(IpIn(internet_netns(), {"addr", "add", address + "/32", "dev", "lo"})));
  }
  // nodad: the address is usable now, not after duplicate address detection's second or two.
  SMOLBOX_TRY(Run(IpIn(internet_netns(), {"addr", "add", fmt::format("{}/128", kAllowedAddress6),
                                          "dev", "lo", "nodad"})));
  auto address_end = [](const std::string& netns, const std::string& dev, std::string v4,
                        std::string v6) -> Expected<void> {
    SMOLBOX_TRY(Run(IpIn(netns, {"addr", "add", v4 + "/30", "dev", dev})));
    SMOLBOX_TRY(Run(IpIn(netns, {"addr", "add", v6 + "/64", "dev", dev, "nodad"})));
    return Run(IpIn(netns, {"link", "set", dev, "up"}));
  };
  SMOLBOX_TRY(address_end(internet_netns(), internet_end, kInternetEnd, kInternetEnd6));
  SMOLBOX_TRY(address_end(uplink_netns(), uplink_end, kUplinkAddress, kUplinkAddress6));
  // Only once the link is up: a route through a link that is down is refused.
  SMOLBOX_TRY(Run(IpIn(uplink_netns(), {"route", "add", "default", "via", kInternetEnd})));
  return Run(IpIn(uplink_netns(), {"-6", "route", "add", "default", "via", kInternetEnd6}));
}

Expected<void> TestInternet::WriteConfiguration() const {
  for (const auto& [name, text] :
       {std::pair<std::string, std::string>{"dnsmasq.conf", DnsmasqConfig()},
        {"resolv.conf", fmt::format("nameserver {}\n", kDnsAddress)}}) {
    std::ofstream out(state_dir_ + "/" + name);
    out << text;
    if (!out.flush()) return std::unexpected(Error::Sys("write " + state_dir_ + "/" + name));
  }
  return {};
}

// A CA of this test internet's own, made afresh for each, and the servers' certificate signed
// by it, as a public CA signs a site's: a client verifies it once the CA is in its store, and
// refuses it otherwise.
Expected<void> TestInternet::MakeCertificate() const {
  const std::string dir = state_dir();
  const std::vector<std::string> ec_key = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"};
  std::vector<std::string> ca = {"/usr/bin/openssl", "req", "-x509"};
  ca.insert(ca.end(), ec_key.begin(), ec_key.end());
  for (const char* word :
       {"-days", "1", "-subj", "/CN=smolvm-check test internet CA", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-keyout", "ca-key.pem", "-out", "ca.pem"}) {
    ca.push_back(word);
  }
  std::vector<std::string> request = {"/usr/bin/openssl", "req"};
  request.insert(request.end(), ec_key.begin(), ec_key.end());
  for (const std::string& word :
       {std::string("-subj"), std::string("/CN=api.allowed.test"), std::string("-addext"),
        fmt::format("subjectAltName=DNS:*.allowed.test,DNS:deep.sub.allowed.test,DNS:other.test,"
                    "DNS:shared.test,IP:{},IP:{},IP:{}",
                    kAllowedAddress, kOtherAddress, kAllowedAddress6),
        std::string("-keyout"), std::string("key.pem"), std::string("-out"), std::string("server.csr")}) {
    request.push_back(word);
  }
  std::vector<std::string> sign = {"/usr/bin/openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem",
                                   "-CAkey", "ca-key.pem", "-CAcreateserial", "-days", "1",
                                   "-copy_extensions", "copy", "-out", "cert.pem"};
  for (auto* argv : {&ca, &request, &sign}) {
    std::vector<std::string> in_dir = {"/usr/bin/env", "-C", dir};
    in_dir.insert(in_dir.end(), argv->begin(), argv->end());
    SMOLBOX_TRY(Run(in_dir));
  }
  return {};
}

Expected<void> TestInternet::StartServers() {
  SMOLBOX_TRY(Start("dnsmasq", InNetns(internet_netns(), DnsmasqArgv(state_dir()))));
  SMOLBOX_TRY(Start("internet", InNetns(internet_netns(), InternetServersArgv(state_dir()))));
  return Start("uplink", InUplink(UplinkServersArgv(state_dir())));
}

Expected<void> TestInternet::Start(const std::string& name, const std::vector<std::string>& argv) {
  SMOLBOX_ASSIGN_OR_RETURN(pid_t pid, Spawn(argv, fmt::format("{}/{}.log", state_dir(), name)));
  servers_.push_back({name, pid});
  return {};
}

Expected<void> TestInternet::WaitUntilServing() const {
  const auto query = InUplink({kPython, "-I", TestInternetServersScript(), "query", kDnsAddress,
                               "api.allowed.test", "A", "--timeout", "0.5"});
  for (const Server& server : servers_) {
    const std::string log = fmt::format("{}/{}.log", state_dir(), server.name);
    // The python servers say "ready" once bound; dnsmasq is asked.
    auto serving = [&] {
      return server.name == "dnsmasq"
                 ? DnsAnswers(query)
                 : ("\n" + ReadUpTo(log)).find("\nready\n") != std::string::npos;
    };
    bool ready = WaitUntil([&] { return serving() || !Running(server.pid); }, kStartLimit) &&
                 Running(server.pid);
    if (!ready) {
      std::string why = Running(server.pid)
                            ? fmt::format("not serving after {} s", kStartLimit.count())
                            : "exited";
      return std::unexpected(Error{"start " + server.name,
                                   fmt::format("{}; its log:\n{}", why, ReadUpTo(log)), 0});
    }
  }
  return {};
}

void TestInternet::StopServers() {
  // SIGKILL at once: the servers keep nothing that a clean exit would save.
  for (const Server& server : servers_) kill(-server.pid, SIGKILL);
  for (const Server& server : servers_) waitpid(server.pid, nullptr, 0);
  servers_.clear();
}

std::vector<std::string> TestInternet::InClient(const std::vector<std::string>& argv) const {
  return InNetns(client_netns(), argv);
}

std::vector<std::string> TestInternet::InUplink(const std::vector<std::string>& argv) const {
  return InNetns(uplink_netns(), argv);
}

std::string TestInternet::ServerLog() const {
  std::string text;
  for (const Server& server : servers_) {
    text += fmt::format("--- {} ---\n{}", server.name,
                        ReadUpTo(fmt::format("{}/{}.log", state_dir(), server.name)));
  }
  return text;
}

}  // namespace smolvm_check
