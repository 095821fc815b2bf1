// Many tenants at once, as a service runs them: fifty `smolbox run`s side by side on the ns
// backend, and eight microVMs on the vm backend under TCG. A mix of hellos, transforms through
// volumes, timeouts and memory, fork and output bombs. Each gets a random token of its own and
// must print that token and no other; each limit holds for its own sandbox while the others
// run; and nothing is left when they are done.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fork_bomb.h"
#include "smolbox_runner.h"
#include "test_support.h"

namespace smolbox::testing {
namespace {

constexpr const char* kPython = "/usr/bin/python3";

// Every payload prints its token first, then does its kind's work. Each stops itself (300
// children, 512 MiB, 20 MiB of output), so that it is harmless even with no sandbox.
constexpr const char* kPrintToken = "import os; print(os.environ['TOKEN'], flush=True)\n";
constexpr const char* kHelloPayload = "import os; print(os.environ['TOKEN'])";
constexpr const char* kTransformPayload = R"(
import os
token = open('/in/token.txt').read().strip()
open('/out/result.txt', 'w').write(token[::-1])
print(token)
)";
constexpr const char* kLoopPayload =
    "import os; print(os.environ['TOKEN'], flush=True)\nwhile True: pass";
constexpr const char* kMemoryPayload = R"(
import os
print(os.environ['TOKEN'], flush=True)
held = [bytearray(1 << 20) for _ in range(512)]
print('ALLOCATED', len(held), flush=True)
)";
constexpr const char* kFloodPayload = R"(
import os, sys
print(os.environ['TOKEN'], flush=True)
for _ in range(20): sys.stdout.write('x' * (1 << 20))
)";

enum class Kind { kHello, kTransform, kTimeout, kMemory, kForks, kFlood };
constexpr Kind kKinds[] = {Kind::kHello,  Kind::kTransform, Kind::kTimeout,
                           Kind::kMemory, Kind::kForks,     Kind::kFlood};

struct Tenant {
  Kind kind = Kind::kHello;
  std::string token = RandomToken();
  std::unique_ptr<TempDir> dir;  // the transform's volumes
  Invocation run;
};

// The flags that pick the sandbox ("--backend ns", or the vm's), and the timeout kind's bound:
// long enough for python to start and print its token while all the others start too. Fifty
// pythons starting at once on two cores take seconds (1 s was too short for some), and under
// emulation, with the other guests, longer still.
struct Backend {
  std::vector<std::string> flags;
  const char* loop_timeout;
};

Invocation RunTenant(Tenant& t, const Backend& backend) {
  std::vector<std::string> options = {"run", "--json"};
  options.insert(options.end(), backend.flags.begin(), backend.flags.end());
  options.insert(options.end(), {"-e", "TOKEN=" + t.token, "--timeout",
                                 t.kind == Kind::kTimeout ? backend.loop_timeout : "60s"});
  const char* code = kHelloPayload;
  switch (t.kind) {
    case Kind::kHello:
      break;
    case Kind::kTransform:
      t.dir = std::make_unique<TempDir>("concurrency");
      t.dir->Write("in/token.txt", t.token + "\n");
      std::filesystem::create_directories(t.dir->path() + "/out");
      options.insert(options.end(),
                     {"-v", t.dir->path() + "/in:/in:ro", "-v", t.dir->path() + "/out:/out:rw"});
      code = kTransformPayload;
      break;
    case Kind::kTimeout:
      code = kLoopPayload;
      break;
    case Kind::kMemory:
      options.insert(options.end(), {"--mem", "64M"});
      code = kMemoryPayload;
      break;
    case Kind::kForks:
      options.insert(options.end(), {"--pids", "16"});
      break;
    case Kind::kFlood:
      options.insert(options.end(), {"--output-limit", "64K"});
      code = kFloodPayload;
      break;
  }
  // The fork bomb's own source prints no token: it comes first.
  std::string source = t.kind == Kind::kForks ? std::string(kPrintToken) + kPythonForkBomb : code;
  options.insert(options.end(), {"--", kPython, "-c", source, t.token});
  return RunSmolbox(options);
}

// What this tenant's own limit must have done to it.
void ExpectItsOwnOutcome(const Tenant& t) {
  const nlohmann::json& r = t.run.result;
  ASSERT_TRUE(r.is_object()) << t.run.out << t.run.err;
  std::string out = r.value("stdout", "");
  EXPECT_EQ(out.rfind(t.token + "\n", 0), 0u)
      << "tenant " << t.token << " printed: " << out.substr(0, 200) << "\n"
      << r.dump().substr(0, 400);
  switch (t.kind) {
    case Kind::kHello:
      EXPECT_EQ(r["status"], "exited");
      EXPECT_EQ(out, t.token + "\n");
      break;
    case Kind::kTransform: {
      EXPECT_EQ(r["status"], "exited") << r.dump();
      std::string reversed(t.token.rbegin(), t.token.rend());
      EXPECT_EQ(ReadFileOrEmpty(t.dir->path() + "/out/result.txt"), reversed);
      break;
    }
    case Kind::kTimeout:
      EXPECT_EQ(r["status"], "timeout") << r.dump();
      break;
    case Kind::kMemory:
      EXPECT_EQ(r["status"], "memory_limit") << r.dump();
      EXPECT_EQ(out.find("ALLOCATED"), std::string::npos);
      break;
    case Kind::kForks: {
      EXPECT_EQ(r["status"], "exited") << r.dump();
      size_t at = out.find("forked ");
      ASSERT_NE(at, std::string::npos) << out;
      EXPECT_LT(std::stoi(out.substr(at + 7)), 16) << out;
      break;
    }
    case Kind::kFlood:
      EXPECT_EQ(r["status"], "output_limit") << r.dump().substr(0, 300);
      EXPECT_EQ(out.size(), size_t{64} << 10);
      break;
  }
}

// count tenants at once, the kinds in turn; each checked, and nothing of any left.
void RunTenantsAtOnce(int count, const Backend& backend) {
  std::vector<Tenant> tenants;
  for (int i = 0; i < count; ++i) {
    Tenant& t = tenants.emplace_back();
    t.kind = kKinds[i % std::size(kKinds)];
  }
  std::vector<std::thread> threads;
  for (Tenant& t : tenants) threads.emplace_back([&t, &backend] { t.run = RunTenant(t, backend); });
  for (std::thread& thread : threads) thread.join();

  for (const Tenant& t : tenants) {
    ExpectItsOwnOutcome(t);
    // No output crosses between sandboxes: no other tenant's token in this one's streams.
    std::string streams = t.run.result.value("stdout", "") + t.run.result.value("stderr", "");
    for (const Tenant& other : tenants) {
      if (&other == &t) continue;
      EXPECT_EQ(streams.find(other.token), std::string::npos) << t.token << " saw " << other.token;
    }
  }
  for (const Tenant& t : tenants) {
    EXPECT_EQ(CountProcessesWith(t.token), 0) << "a process of " << t.token << " is left";
  }
  // Each run's directory goes with its run: none of these owners is alive any more.
  std::error_code ec;
  for (const auto& run : std::filesystem::directory_iterator("/run/smolbox/runs", ec)) {
    std::string owner = ReadFileOrEmpty(run.path().string() + "/owner");
    int pid = owner.empty() ? 0 : std::stoi(owner);
    EXPECT_TRUE(pid > 0 && kill(pid, 0) == 0) << "stale run dir " << run.path();
  }
}

TEST(Concurrency, fifty_tenants_at_once_each_see_only_their_own_token_and_limit_and_leave_nothing) {
  RunTenantsAtOnce(50, {{"--backend", "ns"}, "8s"});
}

// Eight microVMs at once under QEMU's emulation: a guest kernel each, the same mix.
TEST(ConcurrencyVm, eight_tenants_at_once_on_vm_tcg_each_see_only_their_own_token_and_limit) {
  RunTenantsAtOnce(8, {{"--backend", "vm", "--accel", "tcg"}, "20s"});
}

}  // namespace
}  // namespace smolbox::testing
