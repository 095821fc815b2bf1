#include "battery/canaries.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <thread>

#include "battery/test_host.h"
#include "test_support.h"

namespace smolvm_check {
namespace {

namespace fs = std::filesystem;
using Names = std::vector<std::string>;

using smolbox::testing::OpenFdCount;
using smolbox::testing::ReadAll;
using smolbox::testing::ReadFileOrEmpty;
using smolbox::testing::TempDir;

// What a client gets from a socket: "" when it cannot connect.
std::string FetchTcp(const std::string& ip, const std::string& port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(port)));
  inet_pton(AF_INET, ip.c_str(), &addr.sin_addr);
  std::string text;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) text = ReadAll(fd);
  close(fd);
  return text;
}

std::string FetchUnix(const std::string& address) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  address.copy(addr.sun_path, address.size());
  auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size());
  std::string text;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0) text = ReadAll(fd);
  close(fd);
  return text;
}

std::string FetchAbstract(const std::string& name) {
  return FetchUnix(std::string(1, '\0') + name);
}

std::string PreadFd(int fd) {
  char buf[256];
  ssize_t n = pread(fd, buf, sizeof buf, 0);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// Detections arrive from the server thread: wait a little for the expected one.
bool EventuallyDetects(const CanarySet& set, const std::function<bool(const std::string&)>& match) {
  for (int i = 0; i < 200; ++i) {
    for (const auto& d : set.Detections()) {
      if (match(d)) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class CanariesTest : public ::testing::Test {
 protected:
  std::unique_ptr<CanarySet> PlantOrDie(bool with_test_host = false) {
    auto set = CanarySet::Plant({dir_.path() + "/case", with_test_host});
    EXPECT_TRUE(set.has_value()) << (set ? "" : set.error().ToString());
    return set ? std::move(*set) : nullptr;
  }
  TempDir dir_{"canaries-test"};
};

TEST_F(CanariesTest, each_token_is_served_by_its_hint_and_names_its_canary) {
  auto set = PlantOrDie();
  ASSERT_TRUE(set);
  const auto& hints = set->hints();
  EXPECT_EQ(set->Leaked(ReadFileOrEmpty(hints.at("canary_file"))), (Names{"file"}));
  EXPECT_EQ(set->Leaked(FetchTcp("127.0.0.1", hints.at("tcp_port"))), (Names{"tcp"}));
  EXPECT_EQ(set->Leaked(FetchUnix(hints.at("unix_socket"))), (Names{"unix_socket"}));
  EXPECT_EQ(set->Leaked(FetchAbstract(hints.at("abstract_socket"))), (Names{"abstract_socket"}));
  EXPECT_EQ(set->Leaked(PreadFd(std::stoi(hints.at("canary_fd")))), (Names{"inherited_fd"}));
  ASSERT_EQ(set->env().size(), 1u);
  EXPECT_TRUE(set->env()[0].starts_with("SMOLVM_CHECK_CANARY=SMOLVM-CANARY-"));
  EXPECT_EQ(set->Leaked(set->env()[0]), (Names{"env"}));
}

TEST_F(CanariesTest, hints_themselves_leak_nothing) {
  auto set = PlantOrDie();
  ASSERT_TRUE(set);
  std::string all;
  for (const auto& [name, value] : set->hints()) all += name + "=" + value + "\n";
  EXPECT_TRUE(set->Leaked(all).empty());
  EXPECT_TRUE(set->Leaked("").empty());
}

TEST_F(CanariesTest, leaked_finds_every_token_in_a_mixed_text) {
  auto set = PlantOrDie();
  ASSERT_TRUE(set);
  std::string text = "noise " + ReadFileOrEmpty(set->hints().at("canary_file")) + " more " +
                     FetchTcp("127.0.0.1", set->hints().at("tcp_port")) + set->env()[0];
  EXPECT_EQ(set->Leaked(text), (Names{"env", "file", "tcp"}));
}

TEST_F(CanariesTest, a_token_the_case_placed_itself_is_found_under_its_name) {
  auto token = NewCanaryToken();
  ASSERT_TRUE(token) << token.error().ToString();
  auto set = CanarySet::Plant({dir_.path() + "/case", false, {{"mount_path:in", *token}}});
  ASSERT_TRUE(set) << set.error().ToString();
  EXPECT_EQ((*set)->Leaked("/tmp/case/mounts/in-" + *token + "/data.txt"), (Names{"mount_path:in"}));
  EXPECT_TRUE((*set)->Leaked("/in/data.txt").empty());
}

TEST_F(CanariesTest, tokens_are_fresh_for_every_set) {
  auto first = PlantOrDie();
  ASSERT_TRUE(first);
  std::string first_file = ReadFileOrEmpty(first->hints().at("canary_file"));
  first.reset();
  auto second = PlantOrDie();
  ASSERT_TRUE(second);
  EXPECT_TRUE(second->Leaked(first_file).empty());
}

TEST_F(CanariesTest, files_and_sockets_are_open_to_every_uid_and_fds_close_on_exec) {
  auto set = PlantOrDie();
  ASSERT_TRUE(set);
  struct stat st {};
  ASSERT_EQ(stat(set->hints().at("canary_file").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  ASSERT_EQ(stat(set->hints().at("canary_dir").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  ASSERT_EQ(stat(set->hints().at("unix_socket").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0777u);
  EXPECT_FALSE(Contains(set->hints().at("unix_socket"), set->hints().at("canary_dir") + "/"));
  for (int fd : set->inherited_fds()) {
    EXPECT_GE(fd, 10);
    EXPECT_TRUE(fcntl(fd, F_GETFD) & FD_CLOEXEC) << fd;
  }
  EXPECT_EQ(set->inherited_fds(), (std::vector<int>{std::stoi(set->hints().at("canary_fd")),
                                                    std::stoi(set->hints().at("tty_fd"))}));
  EXPECT_TRUE(isatty(std::stoi(set->hints().at("tty_fd"))));
}

TEST_F(CanariesTest, a_connection_is_recorded_as_a_detection) {
  auto set = PlantOrDie();
  ASSERT_TRUE(set);
  EXPECT_TRUE(set->Detections().empty());
  FetchTcp("127.0.0.1", set->hints().at("tcp_port"));
  FetchAbstract(set->hints().at("abstract_socket"));
  EXPECT_TRUE(EventuallyDetects(
      *set, [](const std::string& d) { return d == "connection to the loopback TCP server"; }));
  EXPECT_TRUE(EventuallyDetects(
      *set, [](const std::string& d) { return d == "connection to the abstract unix socket"; }));
}

TEST_F(CanariesTest, tiocsti_into_the_slave_is_detected) {
  auto set = PlantOrDie();
  ASSERT_TRUE(set);
  int tty = std::stoi(set->hints().at("tty_fd"));
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int ok = 0;
    for (char c : std::string("id\n")) ok += ioctl(tty, TIOCSTI, &c) == 0;
    _exit(ok == 3 ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) GTEST_SKIP() << "TIOCSTI is not allowed here";
  EXPECT_TRUE(EventuallyDetects(*set, [](const std::string& d) {
    return d == "TIOCSTI injected into the host terminal: 'id\\n'";
  })) << testing::PrintToString(set->Detections());
}

TEST_F(CanariesTest, sigurg_to_the_host_pid_is_detected_and_survived) {
  auto set = PlantOrDie();
  ASSERT_TRUE(set);
  pid_t host = std::stoi(set->hints().at("host_pid"));
  ASSERT_EQ(kill(host, SIGURG), 0);
  std::string expected = "SIGURG from pid " + std::to_string(getpid());
  EXPECT_TRUE(EventuallyDetects(*set, [&](const std::string& d) { return d == expected; }))
      << testing::PrintToString(set->Detections());
  EXPECT_EQ(kill(host, 0), 0);
}

TEST_F(CanariesTest, destruction_leaves_nothing_behind) {
  size_t fds_before = OpenFdCount();
  auto set = PlantOrDie();
  ASSERT_TRUE(set);
  auto hints = set->hints();
  FetchTcp("127.0.0.1", hints.at("tcp_port"));  // the server thread has run
  set.reset();
  EXPECT_EQ(OpenFdCount(), fds_before);
  EXPECT_FALSE(fs::exists(hints.at("canary_dir")));
  EXPECT_FALSE(fs::exists(fs::path(hints.at("unix_socket")).parent_path()));
  EXPECT_TRUE(fs::is_empty(dir_.path() + "/case"));
  EXPECT_EQ(kill(std::stoi(hints.at("host_pid")), 0), -1);  // reaped, not a zombie
  EXPECT_EQ(FetchTcp("127.0.0.1", hints.at("tcp_port")), "");
  EXPECT_EQ(FetchAbstract(hints.at("abstract_socket")), "");
}

TEST_F(CanariesTest, a_failed_plant_is_an_error_and_leaves_nothing) {
  size_t fds_before = OpenFdCount();
  auto set = CanarySet::Plant({"/proc/no-such-dir/case", false});
  ASSERT_FALSE(set.has_value());
  EXPECT_TRUE(Contains(set.error().ToString(), "/proc/no-such-dir/case"));
  EXPECT_EQ(OpenFdCount(), fds_before);
}

TEST_F(CanariesTest, without_the_test_host_its_hints_are_absent) {
  auto set = PlantOrDie(false);
  ASSERT_TRUE(set);
  EXPECT_FALSE(set->hints().contains("testhost_ip"));
  EXPECT_FALSE(set->hints().contains("testhost_port"));
}

// The host interface holding ip, if any.
std::optional<std::string> InterfaceWith(const std::string& ip) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return std::nullopt;
  std::optional<std::string> found;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
    if (ip == text) found = a->ifa_name;
  }
  freeifaddrs(list);
  return found;
}

TEST_F(CanariesTest, the_test_host_serves_its_token_and_is_gone_after_destruction) {
  if (geteuid() != 0) GTEST_SKIP() << "the test host needs root";
  auto set = PlantOrDie(true);
  ASSERT_TRUE(set);
  auto hints = set->hints();
  std::string fetched = FetchTcp(hints.at("testhost_ip"), hints.at("testhost_port"));
  EXPECT_EQ(set->Leaked(fetched), (Names{"testhost"}));
  EXPECT_TRUE(EventuallyDetects(
      *set, [](const std::string& d) { return d == "connection to the test host"; }));
  // The test host is not the host: it is not reachable on loopback at that port.
  EXPECT_EQ(FetchTcp("127.0.0.1", hints.at("testhost_port")), "");
  set.reset();
  EXPECT_EQ(FetchTcp(hints.at("testhost_ip"), hints.at("testhost_port")), "");
}

TEST(TestHost, is_reachable_over_its_veth_and_removed_with_its_namespace) {
  if (geteuid() != 0) GTEST_SKIP() << "the test host needs root";
  auto host = TestHost::Create();
  ASSERT_TRUE(host.has_value()) << host.error().ToString();
  std::string netns = "/run/netns/" + (*host)->netns(), veth = (*host)->host_veth();
  EXPECT_TRUE(fs::exists(netns));
  EXPECT_EQ(InterfaceWith((*host)->host_ip()), veth);
  {
    auto listener = (*host)->ListenTcp();
    ASSERT_TRUE(listener.has_value()) << listener.error().ToString();
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    ASSERT_EQ(getsockname(listener->get(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
    int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    addr.sin_family = AF_INET;
    inet_pton(AF_INET, (*host)->ip().c_str(), &addr.sin_addr);
    EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0)
        << strerror(errno);
    close(client);
  }
  host->reset();
  EXPECT_FALSE(fs::exists(netns));
  EXPECT_EQ(if_nametoindex(veth.c_str()), 0u);
}

TEST(TestHost, a_crashed_runs_namespace_is_removed_by_the_next_host) {
  if (geteuid() != 0) GTEST_SKIP() << "the test host needs root";
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // creates a host and dies without tearing it down
    auto host = TestHost::Create();
    std::string name = host ? (*host)->netns() : "";
    (void)!write(p[1], name.data(), name.size());
    _exit(0);
  }
  close(p[1]);
  std::string name = ReadAll(p[0]);
  close(p[0]);
  waitpid(child, nullptr, 0);
  ASSERT_FALSE(name.empty());
  ASSERT_TRUE(fs::exists("/run/netns/" + name));
  auto next = TestHost::Create();
  ASSERT_TRUE(next.has_value()) << next.error().ToString();
  EXPECT_FALSE(fs::exists("/run/netns/" + name));
}

TEST(TestHost, concurrent_hosts_get_distinct_addresses) {
  if (geteuid() != 0) GTEST_SKIP() << "the test host needs root";
  auto a = TestHost::Create();
  auto b = TestHost::Create();
  ASSERT_TRUE(a.has_value()) << a.error().ToString();
  ASSERT_TRUE(b.has_value()) << b.error().ToString();
  EXPECT_NE((*a)->ip(), (*b)->ip());
  EXPECT_NE((*a)->netns(), (*b)->netns());
}

}  // namespace
}  // namespace smolvm_check
