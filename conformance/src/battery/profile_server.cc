#include "battery/profile_server.h"

#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>

#include "launch/http_call.h"
#include "launch/spawn.h"

namespace smolvm_check {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kStartBound = std::chrono::seconds(60);
// SIGTERM lets a server finish what is in flight and remove its sandboxes; smolbox serve's own
// drain deadline is 30 s.
constexpr auto kStopBound = std::chrono::seconds(45);
// Of the server's output, the tail kept for an error.
constexpr size_t kKeptOutput = 16 << 10;

bool Answers(const std::string& endpoint) {
  auto client = EndpointClient(endpoint);
  client->set_connection_timeout(std::chrono::seconds(1));
  client->set_read_timeout(std::chrono::seconds(5));
  return static_cast<bool>(client->Get("/"));  // any reply, a 404 too
}

bool Exited(pid_t pid) {
  int status = 0;
  return waitpid(pid, &status, WNOHANG) == pid;
}

}  // namespace

Expected<std::unique_ptr<ProfileServer>> ProfileServer::Start(const std::vector<std::string>& words,
                                                              const std::string& endpoint, Launch launch) {
  if (words.empty()) return std::unexpected(Error::Field("server", "is empty"));
  launch.argv = words;
  SMOLBOX_ASSIGN_OR_RETURN(auto path, ResolveProgram(launch.argv[0], launch.env));
  SMOLBOX_ASSIGN_OR_RETURN(auto child, Spawn(launch, path, [](pid_t) -> Expected<void> { return {}; }));
  std::unique_ptr<ProfileServer> server(new ProfileServer());
  server->pid_ = child.pid;
  child.stdin_writer.Reset();
  server->drain_ = std::thread([s = server.get(), out = std::move(child.stdout_reader), err = std::move(child.stderr_reader)] {
    pollfd fds[2] = {{out.get(), POLLIN, 0}, {err.get(), POLLIN, 0}};
    char buffer[4096];
    while (fds[0].fd >= 0 || fds[1].fd >= 0) {
      if (poll(fds, 2, -1) < 0 && errno != EINTR) return;
      for (pollfd& fd : fds) {
        if (fd.fd < 0 || fd.revents == 0) continue;
        ssize_t n = read(fd.fd, buffer, sizeof buffer);
        if (n <= 0) {
          fd.fd = -1;
          continue;
        }
        std::lock_guard lock(s->mutex_);
        s->output_.append(buffer, static_cast<size_t>(n));
        if (s->output_.size() > 2 * kKeptOutput) s->output_.erase(0, s->output_.size() - kKeptOutput);
      }
    }
  });
  auto deadline = Clock::now() + kStartBound;
  while (!Answers(endpoint)) {
    if (Exited(server->pid_)) {
      server->pid_ = -1;
      return std::unexpected(Error::Field("server", fmt::format("exited before it answered on {}: {}", endpoint, server->Output())));
    }
    if (Clock::now() > deadline) {
      return std::unexpected(Error::Field("server", fmt::format("did not answer on {} within 60 s: {}", endpoint, server->Output())));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return server;
}

ProfileServer::~ProfileServer() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    auto deadline = Clock::now() + kStopBound;
    bool gone = false;
    while (!(gone = Exited(pid_)) && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!gone) KillAndReap(pid_);
  }
  if (drain_.joinable()) drain_.join();
}

std::string ProfileServer::Output() {
  std::lock_guard lock(mutex_);
  return output_.size() > kKeptOutput ? output_.substr(output_.size() - kKeptOutput) : output_;
}

}  // namespace smolvm_check
