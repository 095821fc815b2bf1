#include "api_server.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "unique_fd.h"

namespace smolbox::testing {

ApiServer::ApiServer(const std::vector<std::string>& extra, const std::string& listen,
                     const std::vector<std::string>& env, const std::vector<std::string>& prefix) {
  dir_ = std::make_unique<TempDir>("api");
  std::vector<std::string> args = {"serve", "--listen", listen.empty() ? "unix:" + dir_->path() + "/api.sock" : listen};
  args.insert(args.end(), extra.begin(), extra.end());
  process_ = std::make_unique<LiveSmolbox>(args, env, prefix);
  std::string out = process_->ReadStdoutUntil("\n", std::chrono::seconds(30));
  const std::string listening = "smolbox serve: listening on ";
  if (out.starts_with(listening) && out.ends_with("\n")) address_ = out.substr(listening.size(), out.size() - listening.size() - 1);
  if (address_.starts_with("unix:")) socket_path_ = address_.substr(5);
}

ApiServer::~ApiServer() {
  if (!stopped_) Stop(SIGTERM);
}

int ApiServer::port() const {
  size_t colon = address_.rfind(':');
  return colon == std::string::npos ? 0 : std::stoi(address_.substr(colon + 1));
}

std::unique_ptr<httplib::Client> ApiServer::Client() const {
  auto client = std::make_unique<httplib::Client>(socket_path_);
  client->set_address_family(AF_UNIX);
  client->set_read_timeout(std::chrono::seconds(120));
  return client;
}

std::optional<int> ApiServer::Stop(int signal) {
  stopped_ = true;
  kill(process_->pid(), signal);
  return process_->Wait(std::chrono::seconds(60));
}

HangUp PostThenHangUpWhen(const ApiServer& server, const std::string& path, const std::string& body,
                          const std::function<bool()>& running) {
  HangUp seen;
  UniqueFd connection(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (!connection.valid() || server.socket_path().size() >= sizeof(address.sun_path)) return seen;
  std::memcpy(address.sun_path, server.socket_path().data(), server.socket_path().size());
  if (connect(connection.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) return seen;
  std::string request = "POST " + path + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n" +
                        "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  if (send(connection.get(), request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) return seen;
  // Polled rather than timed, so that a slow start on a loaded machine is not taken for a lost run.
  seen.running = WaitUntil(running, std::chrono::seconds(60));
  // The server sends a run's headers at once and its body when the run ends.
  char reply[4096];
  ssize_t size = recv(connection.get(), reply, sizeof(reply), MSG_DONTWAIT);
  std::string text(reply, size > 0 ? size_t(size) : 0);
  size_t headers_end = text.find("\r\n\r\n");
  seen.answered = headers_end != std::string::npos && headers_end + 4 < text.size();
  return seen;  // closing the connection is the hang-up
}

std::vector<nlohmann::json> NdjsonLines(const std::string& body) {
  std::vector<nlohmann::json> lines;
  size_t start = 0;
  for (size_t end; (end = body.find('\n', start)) != std::string::npos; start = end + 1) {
    lines.push_back(nlohmann::json::parse(body.substr(start, end - start), nullptr, false));
  }
  return lines;
}

std::vector<std::string> ApiSandboxesOnHost() {
  std::vector<std::string> names;
  Invocation ls = RunSmolbox({"ls", "--json"});
  auto list = nlohmann::json::parse(ls.out, nullptr, false);
  if (!list.is_array()) return {"<smolbox ls --json printed no list>"};
  for (const auto& box : list) {
    std::string name = box.value("name", "");
    if (name.starts_with("api-")) names.push_back(name);
  }
  return names;
}

std::pair<int, nlohmann::json> Post(httplib::Client& client, const std::string& path, const std::string& body) {
  auto reply = client.Post(path.c_str(), body, "application/json");
  if (!reply) return {-1, nlohmann::json()};
  return {reply->status, nlohmann::json::parse(reply->body, nullptr, false)};
}

}  // namespace smolbox::testing
