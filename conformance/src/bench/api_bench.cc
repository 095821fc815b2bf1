#include "bench/api_bench.h"

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "launch/interrupt.h"
#include "launch/subprocess.h"

namespace smolvm_check {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kPoolSize = 2;
constexpr const char* kCode = "print(42)";
constexpr const char* kExpected = "42\n";
// Bounds, generous enough for an emulated VM; they bound, they do not time.
constexpr auto kStartBound = std::chrono::seconds(30);
constexpr auto kPoolBound = std::chrono::seconds(180);
constexpr auto kRequestBound = std::chrono::seconds(120);
constexpr auto kStopBound = std::chrono::seconds(60);
// A burst's runs at once: smolbox serve's default --max-concurrent-execs, for the bare floor.
constexpr int kBurstSlots = 16;
// A burst's request waits behind the whole burst: its time in the queue, its run's timeout and
// its client's bound are the burst's, generous for an emulated VM.
constexpr int64_t kBurstTimeoutMs = 20 * 60 * 1000;
constexpr const char* kEchoCode = "import sys; print(sys.argv[1])";

std::string Variable(const Profile& profile, const std::string& name, const std::string& fallback) {
  auto it = profile.variables.find(name);
  return it == profile.variables.end() ? fallback : it->second;
}

int64_t MsSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

std::unique_ptr<httplib::Client> ClientOf(const std::string& socket,
                                          std::chrono::milliseconds bound = kRequestBound) {
  auto client = std::make_unique<httplib::Client>(socket);
  client->set_address_family(AF_UNIX);
  client->set_read_timeout(bound);
  return client;
}

// The bare interpreter gets the environment a sandboxed workload gets, as the warm rows'
// baseline does.
CaptureOptions BareOptions() {
  CaptureOptions options;
  options.extra_env = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/tmp"};
  options.only_extra_env = true;
  return options;
}

// A burst's result from each request's latency (-1: none) and why it has none.
BurstResult Collected(const std::vector<int64_t>& ms, const std::vector<std::string>& wrong, Clock::time_point start) {
  BurstResult burst;
  burst.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (size_t i = 0; i < ms.size(); ++i) {
    if (ms[i] >= 0) burst.ms.push_back(ms[i]);
    else burst.failures.push_back(wrong[i].empty() ? fmt::format("run {}: not run, the bench was stopped", i) : wrong[i]);
  }
  return burst;
}

// What the request's result says, when it is not exited 0 with 42.
std::optional<std::string> WrongResult(const json& result) {
  if (!result.is_object()) return "the reply is not a result";
  std::string status = result.value("status", "");
  if (status != "exited" || result.value("exit_code", -1) != 0) {
    return fmt::format("status {} ({})", status, result.value("error", result.value("stderr", "")));
  }
  if (result.value("stdout", "") != kExpected) return fmt::format("stdout {:?}", result.value("stdout", ""));
  return std::nullopt;
}

void StopServer(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  auto deadline = Clock::now() + kStopBound;
  while (waitpid(pid, nullptr, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

bool HasApiPath(const Profile& profile) {
  if (profile.name == "null") return true;
  std::string backend = Variable(profile, "backend", "");
  return profile.name.starts_with("smolbox:") && !profile.fresh_boot && (backend == "ns" || backend == "vm");
}

Expected<std::unique_ptr<ApiBench>> ApiBench::Start(const Profile& profile) {
  if (!HasApiPath(profile)) return std::unexpected(Error{profile.name, "has no API path", 0});
  std::unique_ptr<ApiBench> api(new ApiBench());
  auto interpreter = profile.interpreters.find("python");
  api->python_ = interpreter != profile.interpreters.end() ? interpreter->second : std::vector<std::string>{"/usr/bin/python3"};
  if (profile.name == "null") return api;

  std::string backend = Variable(profile, "backend", "");
  std::string accel = Variable(profile, "accel", "auto");
  std::string image = Variable(profile, "image", "host");
  json spec = {{"backend", backend}};
  api->pool_name_ = backend;
  if (backend == "vm" && accel != "auto") {
    spec["accel"] = accel;
    api->pool_name_ += "-" + accel;
  }
  if (image != "host") {
    spec["image"] = image;
    api->pool_name_ += ":" + image;
  }
  api->spec_ = spec.dump();
  api->smolbox_ = Variable(profile, "smolbox", "smolbox");
  char dir[] = "/tmp/smolvm-check-api-XXXXXX";
  if (mkdtemp(dir) == nullptr) return std::unexpected(Error::Sys("mkdtemp"));
  api->dir_ = dir;
  SMOLBOX_ASSIGN_OR_RETURN(api->pooled_, api->Launch("pooled", {"--pool", fmt::format("{}={}", api->pool_name_, kPoolSize)}));
  SMOLBOX_ASSIGN_OR_RETURN(api->plain_, api->Launch("plain", {}));
  auto created = ClientOf(api->plain_.socket)->Post("/v1/sandboxes", api->spec_, "application/json");
  if (!created || created->status != 201) {
    return std::unexpected(Error{"POST /v1/sandboxes", created ? created->body : httplib::to_string(created.error()), 0});
  }
  api->sandbox_id_ = json::parse(created->body, nullptr, false).value("id", "");
  return api;
}

ApiBench::~ApiBench() {
  if (!sandbox_id_.empty()) (void)ClientOf(plain_.socket)->Delete("/v1/sandboxes/" + sandbox_id_);
  StopServer(pooled_.pid);
  StopServer(plain_.pid);
  if (!dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

Expected<ApiBench::Server> ApiBench::Launch(const std::string& name, const std::vector<std::string>& extra) {
  Server server;
  server.socket = fmt::format("{}/{}.sock", dir_, name);
  std::string out = fmt::format("{}/{}.out", dir_, name);
  // A burst's requests may wait in the queue as long as their timeout.
  std::vector<std::string> words = {smolbox_, "serve", "--listen", "unix:" + server.socket, "--max-queue-wait",
                                    fmt::format("{}ms", kBurstTimeoutMs)};
  words.insert(words.end(), extra.begin(), extra.end());
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  // Its stdout to a file, where it says when it listens; its stderr is the bench's.
  int out_fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (out_fd < 0) return std::unexpected(Error::Sys("create " + out));
  pid_t parent = getpid();
  server.pid = fork();
  if (server.pid < 0) {
    close(out_fd);
    return std::unexpected(Error::Sys("fork"));
  }
  if (server.pid == 0) {
    // A bench killed outright takes its servers along; they take their pools.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    dup2(out_fd, STDOUT_FILENO);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  close(out_fd);
  auto deadline = Clock::now() + kStartBound;
  while (Clock::now() < deadline) {
    std::ifstream in(out);
    std::stringstream printed;
    printed << in.rdbuf();
    if (printed.str().find("listening on") != std::string::npos) return server;
    if (waitpid(server.pid, nullptr, WNOHANG) == server.pid) {
      server.pid = -1;
      return std::unexpected(Error{"smolbox serve", "exited before it listened (its stderr says why)", 0});
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  StopServer(server.pid);
  return std::unexpected(Error{"smolbox serve", "did not listen within 30 s", 0});
}

Expected<void> ApiBench::WaitForFullPool() {
  std::string ready = fmt::format("\nsmolbox_pool_ready{{pool=\"{}\"}} ", pool_name_);
  auto client = ClientOf(pooled_.socket);
  auto deadline = Clock::now() + kPoolBound;
  while (Clock::now() < deadline) {
    auto metrics = client->Get("/metrics");
    size_t at = metrics ? metrics->body.find(ready) : std::string::npos;
    if (at != std::string::npos && std::atoi(metrics->body.c_str() + at + ready.size()) >= kPoolSize) return {};
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::unexpected(Error{"--pool", fmt::format("{} was not full again within {} s", pool_name_, kPoolBound.count()), 0});
}

Expected<int64_t> ApiBench::Sample(ApiPath path) {
  std::vector<std::string> argv = python_;
  argv.insert(argv.end(), {"-c", kCode});
  if (smolbox_.empty()) {
    auto start = Clock::now();
    auto run = RunCaptured(argv, BareOptions());
    int64_t ms = MsSince(start);
    SMOLBOX_TRY(run);
    if (run->exit_code != 0 || run->out != kExpected) {
      return std::unexpected(Error{"bare", fmt::format("exit {}, stdout {:?}", run->exit_code, run->out), 0});
    }
    return ms;
  }
  if (path == ApiPath::kExec) {
    auto client = ClientOf(plain_.socket);
    std::string body = json{{"argv", argv}}.dump();
    auto start = Clock::now();
    auto reply = client->Post("/v1/sandboxes/" + sandbox_id_ + "/exec", body, "application/json");
    int64_t ms = MsSince(start);
    if (!reply || reply->status != 200) {
      return std::unexpected(Error{"exec", reply ? reply->body : httplib::to_string(reply.error()), 0});
    }
    // The NDJSON's last line is the result; the output came before it.
    std::string stdout_text;
    json last;
    std::istringstream lines(reply->body);
    for (std::string line; std::getline(lines, line);) {
      last = json::parse(line, nullptr, false);
      if (last.is_object() && last.value("type", "") == "stdout") stdout_text += last.value("data", "");
    }
    json result = last.is_object() ? last.value("result", json()) : json();
    if (result.is_object()) result["stdout"] = stdout_text;
    if (auto wrong = WrongResult(result)) return std::unexpected(Error{"exec", *wrong, 0});
    return ms;
  }
  bool pooled = path == ApiPath::kPooledRun;
  if (pooled) SMOLBOX_TRY(WaitForFullPool());
  json spec = json::parse(spec_);
  spec["argv"] = argv;
  auto client = ClientOf(pooled ? pooled_.socket : plain_.socket);
  std::string body = spec.dump();
  auto start = Clock::now();
  auto reply = client->Post("/v1/run", body, "application/json");
  int64_t ms = MsSince(start);
  if (!reply || reply->status != 200) {
    return std::unexpected(Error{"run", reply ? reply->body : httplib::to_string(reply.error()), 0});
  }
  if (auto wrong = WrongResult(json::parse(reply->body, nullptr, false))) return std::unexpected(Error{"run", *wrong, 0});
  if (pooled && reply->get_header_value("Smolbox-Pooled") != "true") {
    return std::unexpected(Error{"run", "was not served by the pool", 0});
  }
  return ms;
}

BurstResult ApiBench::Burst(int count, bool pooled) {
  if (smolbox_.empty()) return BareBurst(count);
  if (pooled) {
    if (auto full = WaitForFullPool(); !full) return {{}, {full.error().ToString()}, 0};
  }
  json spec = json::parse(spec_);
  spec["limits"] = {{"timeout_ms", kBurstTimeoutMs}};
  std::vector<int64_t> ms(static_cast<size_t>(count), -1);
  std::vector<std::string> wrong(static_cast<size_t>(count));
  const std::string& socket = pooled ? pooled_.socket : plain_.socket;
  auto start = Clock::now();
  std::vector<std::thread> clients;
  for (int n = 0; n < count; ++n) {
    clients.emplace_back([&, n] {
      std::string token = fmt::format("burst-{}", n);
      json request = spec;
      request["argv"] = python_;
      request["argv"].insert(request["argv"].end(), {"-c", kEchoCode, token});
      auto client = ClientOf(socket, std::chrono::milliseconds(kBurstTimeoutMs + 60000));
      auto sent = Clock::now();
      auto reply = client->Post("/v1/run", request.dump(), "application/json");
      int64_t took = MsSince(sent);
      auto i = static_cast<size_t>(n);
      if (!reply || reply->status != 200) {
        wrong[i] = fmt::format("run {}: {}", n, reply ? fmt::format("{} {}", reply->status, reply->body.substr(0, 200))
                                                      : httplib::to_string(reply.error()));
        return;
      }
      json result = json::parse(reply->body, nullptr, false);
      std::string out = result.is_object() ? result.value("stdout", "") : "";
      if (out != token + "\n") {
        wrong[i] = fmt::format("run {}: {}", n, reply->body.substr(0, 200));
        return;
      }
      ms[i] = took;
    });
  }
  // A bench stopped mid-burst stops the server, whose drain ends the requests, rather than wait.
  std::atomic<bool> done = false;
  std::thread watcher([&] {
    while (!done && !Interrupted()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!done) kill(pooled ? pooled_.pid : plain_.pid, SIGTERM);
  });
  for (auto& client : clients) client.join();
  done = true;
  watcher.join();
  return Collected(ms, wrong, start);
}

BurstResult ApiBench::BareBurst(int count) const {
  std::vector<int64_t> ms(static_cast<size_t>(count), -1);
  std::vector<std::string> wrong(static_cast<size_t>(count));
  std::atomic<int> next = 0;
  auto start = Clock::now();
  std::vector<std::thread> slots;
  for (int slot = 0; slot < std::min(count, kBurstSlots); ++slot) {
    slots.emplace_back([&] {
      for (int n = next++; n < count && !Interrupted(); n = next++) {
        std::string token = fmt::format("burst-{}", n);
        std::vector<std::string> argv = python_;
        argv.insert(argv.end(), {"-c", kEchoCode, token});
        auto run = RunCaptured(argv, BareOptions());
        auto i = static_cast<size_t>(n);
        if (!run || run->exit_code != 0 || run->out != token + "\n") {
          wrong[i] = fmt::format("run {}: {}", n, run ? fmt::format("exit {}, stdout {:?}", run->exit_code, run->out)
                                                      : run.error().ToString());
          continue;
        }
        ms[i] = MsSince(start);
      }
    });
  }
  for (auto& slot : slots) slot.join();
  return Collected(ms, wrong, start);
}

}  // namespace smolvm_check
