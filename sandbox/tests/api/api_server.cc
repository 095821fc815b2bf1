#include "api_server.h"

#include <signal.h>
#include <sys/socket.h>

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
