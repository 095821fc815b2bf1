// A real `smolbox serve` for the API tests, on a unix socket in a scratch directory (or on
// loopback TCP), and clients for it.
//
//   ApiServer server;                       // smolbox serve --listen unix:<tmp>/api.sock
//   auto client = server.Client();
//   auto reply = client->Post("/v1/run", R"({"argv": ["/bin/true"]})", "application/json");
#pragma once

#include <httplib.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "smolbox_runner.h"
#include "test_support.h"

namespace smolbox::testing {

class ApiServer {
 public:
  // extra: more flags for smolbox serve. With listen empty, it listens on a unix socket of its own.
  // env: more variables for the server (K=V); prefix: a command that execs it (LiveSmolbox's).
  explicit ApiServer(const std::vector<std::string>& extra = {}, const std::string& listen = "",
                     const std::vector<std::string>& env = {}, const std::vector<std::string>& prefix = {});
  // SIGTERM, as a service manager stops it, and a wait for its drain.
  ~ApiServer();

  // What it printed on starting: its address ("unix:/tmp/.../api.sock", "tcp:127.0.0.1:40123"),
  // or empty when it did not start.
  const std::string& address() const { return address_; }
  const std::string& socket_path() const { return socket_path_; }
  int port() const;
  LiveSmolbox& process() { return *process_; }

  // A client of its unix socket, with a read timeout long enough for any run in these tests.
  std::unique_ptr<httplib::Client> Client() const;

  // Stops it with signal and returns its exit code (nothing if it outlives the wait).
  std::optional<int> Stop(int signal);

 private:
  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<LiveSmolbox> process_;
  std::string address_;
  std::string socket_path_;
  bool stopped_ = false;
};

// POSTs body as JSON and returns the status and the parsed reply (null when it is not JSON;
// status -1 when there was no reply).
std::pair<int, nlohmann::json> Post(httplib::Client& client, const std::string& path, const std::string& body);

// A client that leaves mid-request: POSTs body on a connection of its own to the server's unix
// socket, holds it unread until `running` holds (polled for up to 60 s), then hangs up.
// What it saw before hanging up:
struct HangUp {
  bool running = false;   // `running` held
  bool answered = false;  // a reply's body came first (the request ended before its client left)
};
HangUp PostThenHangUpWhen(const ApiServer& server, const std::string& path, const std::string& body,
                          const std::function<bool()>& running);

// The lines of an NDJSON reply, each parsed.
std::vector<nlohmann::json> NdjsonLines(const std::string& body);

// Names of the persistent sandboxes that an API server made (api-...), from smolbox ls.
std::vector<std::string> ApiSandboxesOnHost();

}  // namespace smolbox::testing
