// The HTTP API server's own cost per request, apart from the sandbox's: a real `smolbox serve`
// (the smolbox next to this program) on a unix socket, asked by a client in this process.
//
//   BM_ApiHealth          GET /v1/health: the HTTP round trip alone
//   BM_ApiRunRefused      POST /v1/run with a whole RunSpec, parsed and validated, refused with a
//                         400 for one bad limit: what a run request costs the server before it
//                         starts anything
//   BM_Exec/direct        an exec of /bin/true into a persistent sandbox, straight to its keeper
//                         as `smolbox exec` does
//   BM_Exec/api           the same exec through POST /v1/sandboxes/{id}/exec
//
// The server's overhead on an exec is BM_Exec/api minus BM_Exec/direct; on a pooled run it is
// the same exec path behind the same HTTP handling.
#include <benchmark/benchmark.h>
#include <httplib.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench_main.h"
#include "client.h"
#include "smolbox/backend.h"
#include "smolbox/result.h"

namespace smolbox::bench {
namespace {

using nlohmann::json;

// A whole spec, as a client sends one, with one limit out of range.
constexpr const char* kRefusedSpec =
    R"json({"backend": "ns", "argv": ["/usr/bin/python3", "-c", "print(42)"], "env": {"A": "1", "B": "2"},
        "stdin": "some input", "limits": {"timeout_ms": 5000, "memory_mib": 1, "pids": 32, "cpus": 0.5}})json";

class Server {
 public:
  // The one server of this program, started on first use; nullptr, with why, when it cannot be.
  static Server* Get(std::string& why) {
    static std::unique_ptr<Server> server = Start(why_);
    why = why_;
    return server.get();
  }

  ~Server() {
    if (!sandbox_.empty()) (void)Client()->Delete("/v1/sandboxes/" + sandbox_);
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::unique_ptr<httplib::Client> Client() const {
    auto client = std::make_unique<httplib::Client>(dir_ + "/api.sock");
    client->set_address_family(AF_UNIX);
    client->set_read_timeout(std::chrono::seconds(60));
    return client;
  }
  const std::string& sandbox() const { return sandbox_; }

 private:
  static std::unique_ptr<Server> Start(std::string& why) {
    auto server = std::unique_ptr<Server>(new Server());
    char dir[] = "/tmp/smolbox-api-bench-XXXXXX";
    if (mkdtemp(dir) == nullptr) return why = "mkdtemp failed", nullptr;
    server->dir_ = dir;
    std::string smolbox = std::filesystem::read_symlink("/proc/self/exe").parent_path().string() + "/smolbox";
    std::string out = server->dir_ + "/serve.out";
    std::string listen = "unix:" + server->dir_ + "/api.sock";
    pid_t parent = getpid();
    server->pid_ = fork();
    if (server->pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(127);
      if (!freopen(out.c_str(), "w", stdout)) _exit(127);
      execl(smolbox.c_str(), "smolbox", "serve", "--listen", listen.c_str(), nullptr);
      _exit(127);
    }
    for (int i = 0; i < 1500; ++i) {
      std::ifstream in(out);
      std::stringstream printed;
      printed << in.rdbuf();
      if (printed.str().find("listening on") != std::string::npos) break;
      if (waitpid(server->pid_, nullptr, WNOHANG) == server->pid_) return why = smolbox + " serve exited", nullptr;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    auto created = server->Client()->Post("/v1/sandboxes", R"({"backend": "ns"})", "application/json");
    if (!created || created->status != 201) {
      return why = "POST /v1/sandboxes: " + (created ? created->body : httplib::to_string(created.error())), nullptr;
    }
    server->sandbox_ = json::parse(created->body).value("id", "");
    return server;
  }

  Server() = default;
  static inline std::string why_;
  pid_t pid_ = -1;
  std::string dir_;
  std::string sandbox_;
};

Server* ServerOrFail(benchmark::State& state) {
  std::string why;
  Server* server = Server::Get(why);
  if (server == nullptr) Fail(state, "smolbox serve: " + why);
  return server;
}

void BM_ApiHealth(benchmark::State& state) {
  Server* server = ServerOrFail(state);
  if (server == nullptr) return;
  auto client = server->Client();
  for (auto _ : state) {
    auto reply = client->Get("/v1/health");
    if (!reply || reply->status != 200) return Fail(state, "GET /v1/health failed");
  }
}
BENCHMARK(BM_ApiHealth)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_ApiRunRefused(benchmark::State& state) {
  Server* server = ServerOrFail(state);
  if (server == nullptr) return;
  auto client = server->Client();
  for (auto _ : state) {
    auto reply = client->Post("/v1/run", kRefusedSpec, "application/json");
    if (!reply || reply->status != 400 || reply->body.find("limits.memory_mib") == std::string::npos) {
      return Fail(state, "POST /v1/run was not refused naming limits.memory_mib: " + (reply ? reply->body : "no reply"));
    }
  }
}
BENCHMARK(BM_ApiRunRefused)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_Exec(benchmark::State& state, bool through_api) {
  Server* server = ServerOrFail(state);
  if (server == nullptr) return;
  auto client = server->Client();
  std::string path = "/v1/sandboxes/" + server->sandbox() + "/exec";
  for (auto _ : state) {
    if (through_api) {
      auto reply = client->Post(path, R"({"argv": ["/bin/true"]})", "application/json");
      if (!reply || reply->status != 200 || reply->body.find(R"("status":"exited")") == std::string::npos) {
        return Fail(state, "POST exec: " + (reply ? reply->body : "no reply"));
      }
    } else {
      persist::ExecOrder order;
      order.argv = {"/bin/true"};
      RunResult result = persist::ExecInSandbox(server->sandbox(), order, ExecIo{});
      if (result.status != Status::kExited || result.exit_code != 0) {
        return Fail(state, "exec: " + ToString(result.status) + " " + result.error);
      }
    }
  }
}
BENCHMARK_CAPTURE(BM_Exec, direct, false)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Exec, api, true)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace smolbox::bench

int main(int argc, char** argv) { return smolbox::bench::Main(argc, argv); }
