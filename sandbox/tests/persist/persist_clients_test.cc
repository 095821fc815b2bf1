// Many clients of many persistent sandboxes at once: 20 sandboxes on the ns backend, 5 clients
// each, every client running `smolbox exec` six times without waiting for the others. An exec
// either runs (its token comes back, and lands in the sandbox's log) or is told the sandbox is
// busy (exit 125, setup_error naming "busy"), and then left no trace. Nothing is lost: the log in
// each sandbox holds exactly the tokens of the execs that ran. Nothing is left after rm.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "smolbox_runner.h"
#include "test_support.h"

namespace smolbox::testing {
namespace {

constexpr int kSandboxes = 20;
constexpr int kClientsEach = 5;
constexpr int kExecsEach = 6;
constexpr const char* kSandboxDir = "/run/smolbox/sandboxes";
// Appends its token to the sandbox's log, then prints it; a short sleep widens the window in
// which the other clients find the sandbox busy.
constexpr const char* kLogAndEcho =
    "import sys, time\nopen('/work/log', 'a').write(sys.argv[1] + '\\n')\ntime.sleep(0.05)\nprint(sys.argv[1])";

struct Tally {
  std::mutex mutex;
  std::vector<std::set<std::string>> ran = std::vector<std::set<std::string>>(kSandboxes);
  int busy = 0;
  std::vector<std::string> errors;
};

void Client(const std::string& name, int box, int client, Tally& tally) {
  for (int i = 0; i < kExecsEach; ++i) {
    std::string token = fmt::format("{}-{}-{}-{}", box, client, i, RandomToken().substr(0, 8));
    Invocation exec = RunSmolbox({"exec", "--json", name, "--", "/usr/bin/python3", "-c", kLogAndEcho, token});
    std::lock_guard lock(tally.mutex);
    if (exec.exit_code == 0 && exec.result.value("stdout", "") == token + "\n") {
      tally.ran[box].insert(token);
    } else if (exec.exit_code == 125 && exec.result.value("status", "") == "setup_error" &&
               exec.result.value("error", "").find("busy") != std::string::npos) {
      ++tally.busy;
    } else {
      tally.errors.push_back(fmt::format("{} exec {}: exit {}, {}", name, token, exec.exit_code, exec.out + exec.err));
    }
  }
}

TEST(PersistentClients, twenty_sandboxes_with_five_clients_each_lose_nothing_and_report_busy_as_documented) {
  std::vector<std::string> names;
  for (int b = 0; b < kSandboxes; ++b) {
    names.push_back("clients-" + RandomToken().substr(0, 12));
    Invocation created = RunSmolbox({"create", "--backend", "ns", names.back()});
    ASSERT_EQ(created.exit_code, 0) << created.err;
  }
  Tally tally;
  std::vector<std::thread> clients;
  for (int b = 0; b < kSandboxes; ++b) {
    for (int c = 0; c < kClientsEach; ++c) clients.emplace_back([&, b, c] { Client(names[b], b, c, tally); });
  }
  for (auto& t : clients) t.join();

  for (size_t i = 0; i < std::min<size_t>(tally.errors.size(), 5); ++i) ADD_FAILURE() << tally.errors[i];
  EXPECT_TRUE(tally.errors.empty()) << tally.errors.size() << " execs neither ran nor were told busy";
  size_t ran = 0;
  for (int b = 0; b < kSandboxes; ++b) {
    ran += tally.ran[b].size();
    EXPECT_FALSE(tally.ran[b].empty()) << names[b] << " ran no exec at all";
    // The log holds the tokens of the execs that ran, each once, and no other.
    Invocation log = RunSmolbox({"exec", "--json", names[b], "--", "/bin/cat", "/work/log"});
    std::multiset<std::string> logged;
    std::istringstream lines(log.result.value("stdout", ""));
    for (std::string line; std::getline(lines, line);) logged.insert(line);
    EXPECT_EQ(logged, std::multiset<std::string>(tally.ran[b].begin(), tally.ran[b].end())) << names[b];
  }
  EXPECT_EQ(ran + static_cast<size_t>(tally.busy) + tally.errors.size(),
            static_cast<size_t>(kSandboxes * kClientsEach * kExecsEach));
  fmt::print("{} execs ran, {} were told busy\n", ran, tally.busy);

  for (const auto& name : names) {
    Invocation rm = RunSmolbox({"rm", name});
    EXPECT_EQ(rm.exit_code, 0) << name << ": " << rm.err;
    EXPECT_FALSE(std::filesystem::exists(std::string(kSandboxDir) + "/" + name)) << name;
  }
  EXPECT_EQ(CountProcessesWith("clients-"), 0) << "a keeper outlived its sandbox";
}

}  // namespace
}  // namespace smolbox::testing
