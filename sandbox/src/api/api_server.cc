#include "api_server.h"

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <thread>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "api_requests.h"
#include "exec_queue.h"
#include "exec_request.h"
#include "client.h"
#include "client_watch.h"
#include "exec_stream.h"
#include "keeper.h"
#include "launch.h"
#include "metrics.h"
#include "sandbox_files.h"
#include "sandbox_state.h"
#include "state.h"
#include "unique_fd.h"
#include "warm_pool.h"

namespace smolbox::api {
namespace {

using nlohmann::json;

constexpr int kExitUsage = 125;
// A token shorter than this is a password, not a secret.
constexpr size_t kMinTokenBytes = 16;
constexpr size_t kMaxTokenFileBytes = 4096;
// Threads beyond the exec slots, so that health, metrics, lists and removes are served while
// every slot runs a workload.
constexpr int kSpareThreads = 8;
// How long a file transfer waits in the queue for a slot at most.
constexpr int64_t kFileTransferTimeoutMs = 30000;
// Each request that runs or waits holds a thread: both bounds are held to this.
constexpr int kMaxServeThreads = 4096;
// After the drain deadline, cancelled requests get this long to finish.
constexpr auto kCancelGrace = std::chrono::seconds(15);

std::string Reason(const Error& error) {
  if (error.errnum == 0) return error.what;
  std::string sys = strerror(error.errnum);
  return error.what.empty() ? sys : error.what + " (" + sys + ")";
}

void ReplyJson(httplib::Response& res, int code, const json& body) {
  res.status = code;
  res.set_content(body.dump() + "\n", "application/json");
}

void ReplyError(httplib::Response& res, int code, const Error& error) {
  ReplyJson(res, code, {{"error", {{"field", error.where}, {"reason", ToValidUtf8(Reason(error))}}}});
}

bool EqualInConstantTime(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

Expected<std::string> ReadToken(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return std::unexpected(Error{"--token-file", "cannot open " + path, errno});
  struct stat st{};
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return std::unexpected(Error::Field("--token-file", path + " is not a regular file"));
  }
  if ((st.st_mode & 077) != 0) {
    return std::unexpected(Error::Field("--token-file", path + " can be read by other users; chmod 600 it"));
  }
  std::string token(kMaxTokenFileBytes + 1, '\0');
  ssize_t n = read(fd.get(), token.data(), token.size());
  if (n < 0) return std::unexpected(Error{"--token-file", "cannot read " + path, errno});
  token.resize(static_cast<size_t>(n));
  if (token.size() > kMaxTokenFileBytes) return std::unexpected(Error::Field("--token-file", path + " is too large"));
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.size() < kMinTokenBytes || token.find_first_of(" \t\r\n") != std::string::npos) {
    return std::unexpected(Error::Field(
        "--token-file", fmt::format("{} must hold one token of at least {} bytes, without spaces", path, kMinTokenBytes)));
  }
  return token;
}

// The endpoint a request is counted under in the metrics.
std::string EndpointOf(const httplib::Request& req) {
  static const std::regex exec(R"(/v1/sandboxes/[^/]+/exec)");
  static const std::regex files(R"(/v1/sandboxes/[^/]+/files/.*)");
  static const std::regex one(R"(/v1/sandboxes/[^/]+)");
  const std::string& p = req.path;
  if (p == "/v1/run") return "run";
  if (p == "/v1/health") return "health";
  if (p == "/metrics") return "metrics";
  if (p == "/v1/sandboxes") return req.method == "POST" ? "create" : "list";
  if (std::regex_match(p, exec)) return "exec";
  if (std::regex_match(p, files)) return req.method == "PUT" ? "upload" : "download";
  if (std::regex_match(p, one)) return req.method == "DELETE" ? "delete" : "get";
  return "other";
}

// A unix socket path to listen on: a stale socket there (a server that died) is replaced, a
// live one or any other file is an error.
Expected<void> ClearUnixPath(const std::string& path) {
  struct stat st{};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return {};
    return std::unexpected(Error{"--listen", "cannot stat " + path, errno});
  }
  if (!S_ISSOCK(st.st_mode)) return std::unexpected(Error::Field("--listen", path + " exists and is not a socket"));
  UniqueFd probe(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  path.copy(address.sun_path, sizeof address.sun_path - 1);
  if (probe.valid() && connect(probe.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
    return std::unexpected(Error::Field("--listen", "another server is listening on " + path));
  }
  if (unlink(path.c_str()) != 0) return std::unexpected(Error{"--listen", "cannot remove the stale " + path, errno});
  return {};
}

class Api {
 public:
  Api(const ServeOptions& options, std::string token, UniqueFd lifeline_read, UniqueFd lifeline_write)
      : options_(options), token_(std::move(token)), lifeline_read_(std::move(lifeline_read)),
        lifeline_write_(std::move(lifeline_write)),
        queue_(options.max_concurrent_execs, options.max_queued) {}

  Expected<void> Start() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return std::unexpected(Error::Sys("pipe"));
    cancel_read_.Reset(fds[0]);
    cancel_write_.Reset(fds[1]);
    launcher_ = Launcher{options_.smolbox_exe, lifeline_read_.get(), cancel_read_.get(), options_.volume_root};
    pool_ = std::make_unique<WarmPool>(options_.pools, launcher_);
    for (const ListenAddress& address : options_.listen) SMOLBOX_TRY(Bind(address));
    pool_->Start();
    for (auto& listener : listeners_) {
      threads_.emplace_back([server = listener.server.get()] { server->listen_after_bind(); });
    }
    return {};
  }

  // SIGTERM: refuse new requests, let those in flight finish until the deadline, cancel the
  // rest, then remove every sandbox this server made.
  void Drain() {
    draining_ = true;
    queue_.Close();  // what waits for a slot is refused now, as a new request is
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.drain_timeout_ms);
    while (in_flight_ > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (in_flight_ > 0) {
      fmt::print(stderr, "smolbox serve: {} requests still running at the drain deadline: cancelling them\n",
                 in_flight_.load());
      cancel_write_.Reset();
      auto grace = std::chrono::steady_clock::now() + kCancelGrace;
      while (in_flight_ > 0 && std::chrono::steady_clock::now() < grace) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    for (auto& listener : listeners_) listener.server->stop();
    for (std::thread& thread : threads_) thread.join();
    pool_->Stop();
    std::vector<std::string> ids;
    {
      std::lock_guard lock(mutex_);
      for (const auto& [id, ready] : sandboxes_) ids.push_back(id);
    }
    for (const std::string& id : ids) {
      if (auto removed = persist::RemoveSandbox(id, true); !removed) {
        fmt::print(stderr, "smolbox serve: {}\n", removed.error().ToString());
      }
    }
    for (const auto& listener : listeners_) {
      if (listener.address.kind == ListenAddress::Kind::kUnix) unlink(listener.address.path.c_str());
    }
  }

 private:
  struct Listener {
    ListenAddress address;
    std::unique_ptr<httplib::Server> server;
  };

  // Counts a request in flight for the drain while it lives.
  std::shared_ptr<void> InFlight() {
    ++in_flight_;
    return std::shared_ptr<void>(nullptr, [this](void*) { --in_flight_; });
  }

  // One of --max-concurrent-execs, taken at once or after a wait in the queue of at most
  // timeout_ms, the request's own timeout, and --max-queue-wait; null, with the reply made, when
  // none came.
  std::shared_ptr<void> TakeExecSlot(int64_t timeout_ms, httplib::Response& res) {
    int64_t wait_ms = std::min(timeout_ms, options_.max_queue_wait_ms);
    auto slot = queue_.Take(std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms));
    if (slot) return *slot;
    switch (slot.error()) {
      case ExecQueue::Refusal::kClosed:
        ReplyError(res, 503, Error::Field("server", "is shutting down"));
        break;
      case ExecQueue::Refusal::kFull:
        // A guess the client may improve on: the queue moves by about a run a second per slot.
        res.set_header("Retry-After", "1");
        ReplyError(res, 429, Error::Field("max_queued", fmt::format("the server runs {} runs and execs at once, and {} "
                                                                    "more wait their turn already; try again",
                                                                    options_.max_concurrent_execs, options_.max_queued)));
        break;
      case ExecQueue::Refusal::kTimedOut:
        res.set_header("Retry-After", "1");
        ReplyError(res, 429, Error::Field(wait_ms < timeout_ms ? "max_queue_wait" : "max_concurrent_execs",
                                          fmt::format("no slot of the {} came free within {} ms, {}",
                                                      options_.max_concurrent_execs, wait_ms,
                                                      wait_ms < timeout_ms ? "the longest the server lets a request wait"
                                                                           : "the request's timeout")));
        break;
    }
    return nullptr;
  }

  Expected<void> Bind(const ListenAddress& address) {
    bool tcp = address.kind == ListenAddress::Kind::kTcp;
    std::unique_ptr<httplib::Server> server;
    if (tcp && !options_.tls_cert.empty()) {
      auto tls = std::make_unique<httplib::SSLServer>(options_.tls_cert.c_str(), options_.tls_key.c_str());
      if (!tls->is_valid()) {
        return std::unexpected(Error::Field("--tls-cert", "cannot load the certificate and key (--tls-key) as PEM"));
      }
      server = std::move(tls);
    } else {
      server = std::make_unique<httplib::Server>();
    }
    // SO_REUSEADDR, to listen again soon after a stop, but never the library's SO_REUSEPORT,
    // which would let a second server on the port share its connections. The socket is kept to
    // widen the library's backlog below.
    auto socket_fd = std::make_shared<int>(-1);
    server->set_socket_options([socket_fd](int sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
      *socket_fd = sock;
    });
    // A thread for each request that runs, each that waits in the queue, and the rest.
    int threads = options_.max_concurrent_execs + options_.max_queued + kSpareThreads;
    server->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
    server->set_payload_max_length(options_.max_body);
    Routes(*server, tcp);
    ListenAddress bound = address;
    if (tcp) {
      int port = address.port == 0 ? server->bind_to_any_port(address.host)
                                   : (server->bind_to_port(address.host, address.port) ? address.port : -1);
      if (port <= 0) return std::unexpected(Error{"--listen", "cannot bind " + address.ToString(), errno});
      bound.port = port;
    } else {
      SMOLBOX_TRY(ClearUnixPath(address.path));
      server->set_address_family(AF_UNIX);
      // Born 0600: only this user may connect, and a unix listener asks for no token.
      mode_t old = umask(0177);
      // The port is not used for a unix socket, but 0 would make the library ask for the one bound.
      bool ok = server->bind_to_port(address.path, 80);
      umask(old);
      if (!ok) return std::unexpected(Error{"--listen", "cannot bind " + address.path, errno});
    }
    // The library listens with a backlog of 5, so that a burst of clients connecting at once
    // would be refused; listen again, as Linux allows, with the system's most.
    if (*socket_fd >= 0 && listen(*socket_fd, SOMAXCONN) != 0) {
      return std::unexpected(Error{"--listen", "cannot listen on " + bound.ToString(), errno});
    }
    fmt::print("smolbox serve: listening on {}\n", bound.ToString());
    std::fflush(stdout);
    listeners_.push_back({bound, std::move(server)});
    return {};
  }

  void Routes(httplib::Server& server, bool needs_token) {
    server.set_pre_routing_handler([this, needs_token](const httplib::Request& req, httplib::Response& res) {
      using Handled = httplib::Server::HandlerResponse;
      request_start_ = std::chrono::steady_clock::now();
      if (needs_token && !EqualInConstantTime(req.get_header_value("Authorization"), "Bearer " + token_)) {
        res.set_header("WWW-Authenticate", "Bearer");
        ReplyError(res, 401, Error::Field("Authorization", "a bearer token (the server's --token-file) is required"));
        return Handled::Handled;
      }
      if (draining_) {
        ReplyError(res, 503, Error::Field("server", "is shutting down"));
        return Handled::Handled;
      }
      return Handled::Unhandled;
    });
    server.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - request_start_;
      metrics_.CountRequest(EndpointOf(req), res.status, ms.count());
    });
    // Routing and size errors come with an empty body: give them the API's JSON error.
    server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      if (res.status == 413 && req.get_header_value("Content-Type").starts_with("application/x-www-form-urlencoded")) {
        // The library holds a form body to 8 KiB whatever --max-body says (curl -d sends one).
        ReplyError(res, 413, Error::Field("Content-Type", "a form-urlencoded body is limited to 8 KiB: send "
                                                          "application/json, or application/octet-stream for files"));
      } else if (res.status == 413) {
        ReplyError(res, 413, Error::Field("body", "is larger than the server's --max-body"));
      } else if (res.status == 404) {
        ReplyError(res, 404, Error::Field("path", fmt::format("no endpoint {} {}", req.method, req.path)));
      } else {
        ReplyError(res, res.status, Error::Field("request", fmt::format("failed with HTTP status {}", res.status)));
      }
    });
    // Never a trace: the client learns that the server failed, the log learns why.
    server.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr e) {
      std::string what = "unknown exception";
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        what = ex.what();
      } catch (...) {
      }
      fmt::print(stderr, "smolbox serve: internal error on {} {}: {}\n", req.method, req.path, what);
      ReplyError(res, 500, Error::Field("server", "internal error"));
    });

    server.Get("/v1/health", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard lock(mutex_);
      ExecQueue::Stats queue = queue_.Snapshot();
      ReplyJson(res, 200, {{"status", "ok"}, {"sandboxes", sandboxes_.size()}, {"execs_running", queue.running},
                           {"execs_queued", queue.queued}});
    });
    server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      std::map<std::string, int> states;
      for (const json& box : ListOurs()) ++states[box["status"].get<std::string>()];
      res.set_content(metrics_.Render(states, queue_.Snapshot(), pool_->Sizes()), "text/plain; version=0.0.4");
    });
    server.Post("/v1/run", [this](const httplib::Request& req, httplib::Response& res) { Run(req, res); });
    server.Post("/v1/sandboxes", [this](const httplib::Request& req, httplib::Response& res) { Create(req, res); });
    server.Get("/v1/sandboxes", [this](const httplib::Request&, httplib::Response& res) {
      ReplyJson(res, 200, {{"sandboxes", ListOurs()}});
    });
    server.Get(R"(/v1/sandboxes/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
      std::string id = req.matches[1];
      if (!Known(id)) return ReplyError(res, 404, Error::Field("id", fmt::format("no sandbox {:?}", id)));
      ReplyJson(res, 200, Describe(id));
    });
    server.Delete(R"(/v1/sandboxes/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
      Remove(req.matches[1], res);
    });
    server.Post(R"(/v1/sandboxes/([^/]+)/exec)", [this](const httplib::Request& req, httplib::Response& res) {
      Exec(req.matches[1], req, res);
    });
    server.Put(R"(/v1/sandboxes/([^/]+)/files/(.*))", [this](const httplib::Request& req, httplib::Response& res) {
      PutFile(req.matches[1], req.matches[2], req, res);
    });
    server.Get(R"(/v1/sandboxes/([^/]+)/files/(.*))", [this](const httplib::Request& req, httplib::Response& res) {
      GetFile(req.matches[1], req.matches[2], res);
    });
  }

  // The run goes on while its reply is being sent, so that the reply's sink can tell whether
  // the client is still there: one that hangs up cancels its run (client_watch.h). The status
  // and headers are sent first, so a run that ends without a result from its child is answered
  // as an internal_error result, not a 500.
  void Run(const httplib::Request& req, httplib::Response& res) {
    auto busy = InFlight();
    auto spec = ParseRunRequest(req.body, options_.volume_root);
    if (!spec) return ReplyError(res, 400, spec.error());
    auto slot = TakeExecSlot(spec->exec.limits.timeout_ms, res);
    if (!slot) return;
    std::optional<std::string> pooled = pool_->Take(*spec);
    if (pooled) res.set_header("Smolbox-Pooled", "true");
    auto request = std::make_shared<RunRequest>();
    request->body = req.body;
    request->spec = std::move(*spec);
    request->pooled = std::move(pooled);
    // A client gone before the reply began never gets the provider called: its pooled sandbox
    // is let go here instead.
    auto release = [this, request](bool) {
      if (request->pooled && !request->started) pool_->Discard(*request->pooled);
    };
    res.set_chunked_content_provider("application/json", [this, request, slot, busy](size_t, httplib::DataSink& sink) {
      request->started = true;
      json reply;
      bool there = RunForClient([&](int cancel_fd) { reply = RunReply(*request, cancel_fd); },
                                [&sink] { return sink.is_writable(); }, cancel_read_.get());
      if (!there) return false;
      std::string text = reply.dump() + "\n";
      sink.write(text.data(), text.size());
      sink.done();
      return true;
    }, release);
  }

  struct RunRequest {
    std::string body;
    RunSpec spec;
    std::optional<std::string> pooled;  // the warm pool's sandbox it runs in, if one matched
    std::atomic<bool> started{false};   // the reply's provider ran (and owns the pooled sandbox)
  };

  // The run's result as run --json prints it: in its pooled sandbox, or in a fresh one when there
  // is none or the pooled one had died before it could start.
  json RunReply(const RunRequest& request, int cancel_fd) {
    if (request.pooled) {
      RunResult result = RunPooled(request.spec, *request.pooled, cancel_fd);
      if (result.status != Status::kSetupError) {
        metrics_.CountResult("run", result);
        metrics_.CountPoolHit();
        return ToJson(result);
      }
      // Nothing of the request ran: the pooled sandbox had died. A sandbox of its own, then.
      fmt::print(stderr, "smolbox serve: pooled sandbox {}: {}\n", *request.pooled, result.error);
    }
    Launcher launcher = launcher_;
    launcher.cancel_fd = cancel_fd;
    auto doc = launcher.Run(request.body, request.spec);
    auto result = doc ? ResultFromJson(*doc) : std::unexpected(doc.error());
    if (!result) {
      fmt::print(stderr, "smolbox serve: run: {}\n", result.error().ToString());
      RunResult failed;
      failed.status = Status::kInternalError;
      failed.error = "the run ended without a result";
      metrics_.CountResult("run", failed);
      return ToJson(failed);
    }
    metrics_.CountResult("run", *result);
    return *doc;
  }

  // spec's command in the warm pool's sandbox id, which is discarded after.
  RunResult RunPooled(const RunSpec& spec, const std::string& id, int cancel_fd) {
    persist::ExecOrder order;
    order.argv = spec.exec.argv;
    order.env = spec.exec.env;
    order.workdir = spec.exec.workdir;
    order.timeout_ms = spec.exec.limits.timeout_ms;
    ExecIo io;
    UniqueFd stdin_file;
    if (spec.exec.stdin_data) {
      auto file = MemoryFile(*spec.exec.stdin_data);
      if (!file) {
        pool_->Discard(id);
        RunResult failed;
        failed.status = Status::kSetupError;
        failed.error = file.error().ToString();
        return failed;
      }
      stdin_file = std::move(*file);
      order.sends_stdin = true;
      io.stdin_fd = stdin_file.get();
    }
    RunResult result = persist::ExecInSandbox(id, order, io, cancel_fd);
    pool_->Discard(id);
    return result;
  }

  void Create(const httplib::Request& req, httplib::Response& res) {
    auto busy = InFlight();
    auto spec = ParseCreateRequest(req.body, options_.volume_root);
    if (!spec) return ReplyError(res, 400, spec.error());
    auto id = NewSandboxId();
    if (!id) return ReplyError(res, 500, Error::Field("server", id.error().ToString()));
    {
      std::lock_guard lock(mutex_);
      if (static_cast<int>(sandboxes_.size()) >= options_.max_sandboxes) {
        return ReplyError(res, 429, Error::Field("max_sandboxes", fmt::format("the server holds {} sandboxes, its "
                                                                              "most; remove one first",
                                                                              sandboxes_.size())));
      }
      sandboxes_[*id] = false;
    }
    auto setup = launcher_.Create(*id, req.body);
    std::lock_guard lock(mutex_);
    if (!setup) {
      sandboxes_.erase(*id);
      return ReplyError(res, 422, setup.error());
    }
    sandboxes_[*id] = true;
    json reply = *setup;
    reply["id"] = *id;
    ReplyJson(res, 201, reply);
  }

  void Remove(const std::string& id, httplib::Response& res) {
    auto busy = InFlight();
    if (!Known(id)) return ReplyError(res, 404, Error::Field("id", fmt::format("no sandbox {:?}", id)));
    auto removed = persist::RemoveSandbox(id, true);
    if (!removed) return ReplyError(res, 500, Error::Field("id", removed.error().ToString()));
    std::lock_guard lock(mutex_);
    sandboxes_.erase(id);
    ReplyJson(res, 200, {{"id", id}, {"status", "removed"}});
  }

  // What an exec into a sandbox needs first: the sandbox, a slot, and the sandbox not busy.
  // Null, with the reply made, when one is missing.
  std::shared_ptr<void> ExecSlotFor(const std::string& id, int64_t timeout_ms, httplib::Response& res) {
    if (!Known(id)) {
      ReplyError(res, 404, Error::Field("id", fmt::format("no sandbox {:?}", id)));
      return nullptr;
    }
    auto slot = TakeExecSlot(timeout_ms, res);
    if (!slot) return nullptr;
    auto dir = persist::OpenSandboxDir(id);
    auto locked = dir ? persist::IsLocked(dir->get()) : std::unexpected(dir.error());
    if (locked && *locked) {
      ReplyError(res, 409, Error::Field("id", "the sandbox is busy: execs into one sandbox run one at a time"));
      return nullptr;
    }
    return slot;
  }

  void Exec(const std::string& id, const httplib::Request& req, httplib::Response& res) {
    auto busy = InFlight();
    if (!Known(id)) return ReplyError(res, 404, Error::Field("id", fmt::format("no sandbox {:?}", id)));
    auto request = ParseExecRequest(req.body);
    if (!request) return ReplyError(res, 400, request.error());
    auto slot = ExecSlotFor(id, request->order.timeout_ms.value_or(ExecLimits{}.timeout_ms), res);
    if (!slot) return;
    auto shared_request = std::make_shared<ExecRequest>(std::move(*request));
    res.set_chunked_content_provider(
        "application/x-ndjson", [this, id, shared_request, slot, busy](size_t, httplib::DataSink& sink) {
          ExecClient client{[&sink](std::string_view line) { return sink.write(line.data(), line.size()); },
                            [&sink] { return sink.is_writable(); }};
          RunResult result = StreamExec(id, *shared_request, client, cancel_read_.get());
          metrics_.CountResult("exec", result);
          sink.done();
          return true;
        });
  }

  void PutFile(const std::string& id, const std::string& tail, const httplib::Request& req, httplib::Response& res) {
    auto busy = InFlight();
    auto path = SandboxPath(tail);
    if (!path) return ReplyError(res, path.error().status, path.error().error);
    auto slot = ExecSlotFor(id, kFileTransferTimeoutMs, res);
    if (!slot) return;
    auto written = WriteSandboxFile(id, *path, req.body, cancel_read_.get());
    if (!written) return ReplyError(res, written.error().status, written.error().error);
    ReplyJson(res, 201, {{"path", *path}, {"bytes", *written}});
  }

  void GetFile(const std::string& id, const std::string& tail, httplib::Response& res) {
    auto busy = InFlight();
    auto path = SandboxPath(tail);
    if (!path) return ReplyError(res, path.error().status, path.error().error);
    auto slot = ExecSlotFor(id, kFileTransferTimeoutMs, res);
    if (!slot) return;
    auto bytes = ReadSandboxFile(id, *path, cancel_read_.get());
    if (!bytes) return ReplyError(res, bytes.error().status, bytes.error().error);
    res.set_content(std::move(*bytes), "application/octet-stream");
  }

  bool Known(const std::string& id) {
    std::lock_guard lock(mutex_);
    auto it = sandboxes_.find(id);
    return it != sandboxes_.end() && it->second;
  }

  json Describe(const std::string& id) {
    json j = {{"id", id}};
    auto dir = persist::OpenSandboxDir(id);
    if (!dir) {
      j["status"] = "dead";
      j["reason"] = ToValidUtf8(dir.error().ToString());
      return j;
    }
    persist::SandboxListing listing = persist::Inspect(id, dir->get());
    j["status"] = persist::ToString(listing.status);
    if (listing.info) {
      j["backend"] = listing.info->backend;
      j["isolation"] = listing.info->isolation;
      j["created"] = listing.info->created;
    }
    if (!listing.reason.empty()) j["reason"] = ToValidUtf8(listing.reason);
    return j;
  }

  json ListOurs() {
    std::vector<std::string> ids;
    {
      std::lock_guard lock(mutex_);
      for (const auto& [id, ready] : sandboxes_) {
        if (ready) ids.push_back(id);
      }
    }
    json list = json::array();
    for (const std::string& id : ids) list.push_back(Describe(id));
    return list;
  }

  const ServeOptions& options_;
  std::string token_;
  UniqueFd lifeline_read_, lifeline_write_;
  UniqueFd cancel_read_, cancel_write_;  // the write end's close cancels what is in flight
  Launcher launcher_;
  std::vector<Listener> listeners_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::map<std::string, bool> sandboxes_;  // id -> created (false while its create runs)
  ExecQueue queue_;
  std::atomic<int> in_flight_{0};
  std::atomic<bool> draining_{false};
  Metrics metrics_;
  std::unique_ptr<WarmPool> pool_;
  static thread_local std::chrono::steady_clock::time_point request_start_;
};

thread_local std::chrono::steady_clock::time_point Api::request_start_;

Expected<void> CheckOptions(const ServeOptions& options) {
  for (const ListenAddress& address : options.listen) {
    if (address.kind != ListenAddress::Kind::kTcp) continue;
    if (options.token_file.empty()) {
      return std::unexpected(Error::Field("--token-file", fmt::format("is required to listen on {}", address.ToString())));
    }
    if (!IsLoopback(address) && (options.tls_cert.empty() || options.tls_key.empty())) {
      return std::unexpected(Error::Field(
          "--tls-cert", fmt::format("and --tls-key are required to listen on {}, which is not loopback", address.ToString())));
    }
  }
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return std::unexpected(Error::Field("--tls-key", "and --tls-cert go together"));
  }
  if (options.max_sandboxes < 1) return std::unexpected(Error::Field("--max-sandboxes", "must be at least 1"));
  if (options.max_concurrent_execs < 1) {
    return std::unexpected(Error::Field("--max-concurrent-execs", "must be at least 1"));
  }
  if (options.max_concurrent_execs > kMaxServeThreads || options.max_queued < 0 || options.max_queued > kMaxServeThreads) {
    return std::unexpected(Error::Field(options.max_queued < 0 || options.max_queued > kMaxServeThreads ? "--max-queued"
                                                                                                      : "--max-concurrent-execs",
                                        fmt::format("must be from {} to {}", options.max_queued < 0 ? 0 : 1, kMaxServeThreads)));
  }
  if (options.max_body < 1024) return std::unexpected(Error::Field("--max-body", "must be at least 1 KiB"));
  if (options.max_queue_wait_ms < 1) return std::unexpected(Error::Field("--max-queue-wait", "must be positive"));
  if (!options.volume_root.empty()) return CheckVolumeRoot(options.volume_root);
  return {};
}

}  // namespace

Expected<ListenAddress> DefaultListenAddress() {
  SMOLBOX_ASSIGN_OR_RETURN(std::string root, shared::StateRoot());
  return ParseListenAddress("unix:" + root + "/api.sock");
}

int Serve(const ServeOptions& given) {
  ServeOptions options = given;
  if (options.listen.empty()) {
    auto address = DefaultListenAddress();
    if (!address) {
      fmt::print(stderr, "smolbox: {}\n", address.error().ToString());
      return kExitUsage;
    }
    options.listen.push_back(*address);
  }
  std::string token;
  auto checked = CheckOptions(options);
  if (checked && !options.token_file.empty()) {
    auto read = ReadToken(options.token_file);
    if (read) token = std::move(*read);
    else checked = std::unexpected(read.error());
  }
  if (!checked) {
    fmt::print(stderr, "smolbox: {}\n", checked.error().ToString());
    return kExitUsage;
  }
  // Blocked before any thread starts, so that every thread inherits the mask and only sigwait
  // below takes these.
  sigset_t stop;
  sigemptyset(&stop);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&stop, sig);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not the server's end

  SweepDeadApiSandboxes("smolbox serve");
  int lifeline[2];
  if (pipe2(lifeline, O_CLOEXEC) != 0) {
    fmt::print(stderr, "smolbox: pipe: {}\n", strerror(errno));
    return kExitUsage;
  }
  Api api(options, std::move(token), UniqueFd(lifeline[0]), UniqueFd(lifeline[1]));
  if (auto started = api.Start(); !started) {
    fmt::print(stderr, "smolbox: {}\n", started.error().ToString());
    api.Drain();
    return kExitUsage;
  }
  int sig = 0;
  while (sigwait(&stop, &sig) != 0) {
  }
  fmt::print(stderr, "smolbox serve: {}: draining\n", strsignal(sig));
  api.Drain();
  return 0;
}

}  // namespace smolbox::api
