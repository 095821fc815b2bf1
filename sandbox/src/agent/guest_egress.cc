#include "guest_egress.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "egress_link.h"
#include "guest_boot.h"
#include "net.h"
#include "unique_fd.h"

namespace smolbox::agent {
namespace {

// Queries waiting for the host's reply; past this the oldest is forgotten (its client retries).
constexpr size_t kMaxPendingQueries = 256;
// Descriptors for the forwarder: every stream the link carries, plus its own few.
constexpr rlim_t kForwarderFiles = egress_link::kMaxStreams + 64;
constexpr size_t kMaxSetupOutput = 4096;

// Runs smolbox-egress-setup through the loader beside it, so that it finds its own libraries
// and never the rootfs image's.
Expected<void> RunEgressSetup(uint16_t tcp4_port, uint16_t tcp6_port) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return std::unexpected(Error::Sys("pipe2"));
  UniqueFd out_read(out[0]), out_write(out[1]);
  std::string dir = kEgressSetupDir;
  std::string loader = dir + "/lib/ld-linux-x86-64.so.2";
  std::string libs = dir + "/lib";
  std::string program = dir + "/smolbox-egress-setup";
  std::string p4 = std::to_string(tcp4_port), p6 = std::to_string(tcp6_port);
  const char* argv[] = {loader.c_str(), "--library-path", libs.c_str(), program.c_str(),
                        p4.c_str(),     p6.c_str(),       nullptr};
  const char* envp[] = {nullptr};
  pid_t pid = fork();
  if (pid < 0) return std::unexpected(Error::Sys("fork for smolbox-egress-setup"));
  if (pid == 0) {
    dup2(out_write.get(), 2);
    execve(loader.c_str(), const_cast<char* const*>(argv), const_cast<char* const*>(envp));
    _exit(127);
  }
  out_write.Reset();
  std::string said;
  char chunk[512];
  for (ssize_t n; (n = read(out_read.get(), chunk, sizeof chunk)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    if (said.size() < kMaxSetupOutput) said.append(chunk, static_cast<size_t>(n));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  while (!said.empty() && said.back() == '\n') said.pop_back();
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && said.empty())
    said = fmt::format("could not run {} (a guest built without it: run scripts/build-guest)", program);
  return std::unexpected(Error{"egress setup in the guest", said.empty() ? "it failed" : said, 0});
}

// Closes every descriptor but keep: the forwarder holds nothing of the agent's.
void CloseAllBut(const std::set<int>& keep) {
  std::vector<int> open_fds;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] == '.') continue;
      int fd = std::atoi(entry->d_name);
      if (fd != dirfd(dir)) open_fds.push_back(fd);
    }
    closedir(dir);
  }
  for (int fd : open_fds) {
    if (!keep.contains(fd)) close(fd);
  }
}

void ResetAndClose(int fd) {
  linger hard{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
  close(fd);
}

// The forwarder's loop: accepts, tags and relays until the host closes the port.
[[noreturn]] void Forward(confine::EgressSockets& sockets, UniqueFd port) {
  rlimit files{kForwarderFiles, kForwarderFiles};
  setrlimit(RLIMIT_NOFILE, &files);
  // Where each query came from, for its reply; ids only grow, so the first is the oldest.
  std::map<uint32_t, std::pair<sockaddr_storage, socklen_t>> pending;
  uint32_t next_query = 1;
  int dns = sockets.dns.get();
  egress_link::LinkMux mux(port.get(), {.opened = nullptr, .query = nullptr,
                                        .reply = [&](uint32_t query, std::string bytes) {
                                          auto it = pending.find(query);
                                          if (it == pending.end()) return;
                                          sendto(dns, bytes.data(), bytes.size(), MSG_DONTWAIT,
                                                 reinterpret_cast<sockaddr*>(&it->second.first),
                                                 it->second.second);
                                          pending.erase(it);
                                        }});
  auto accept_from = [&](int listener, bool v6) {
    int client = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (client < 0) return;
    auto to = egress_link::OriginalDestination(client, v6);
    if (!to) return ResetAndClose(client);
    mux.Open(UniqueFd(client), *to);
  };
  mux.Watch(sockets.tcp4.get(), [&] { accept_from(sockets.tcp4.get(), false); });
  if (sockets.tcp6.valid())
    mux.Watch(sockets.tcp6.get(), [&] { accept_from(sockets.tcp6.get(), true); });
  mux.Watch(dns, [&] {
    std::string query(4096, '\0');
    sockaddr_storage from{};
    socklen_t from_size = sizeof from;
    ssize_t n = recvfrom(dns, query.data(), query.size(), MSG_DONTWAIT,
                         reinterpret_cast<sockaddr*>(&from), &from_size);
    if (n <= 0) return;
    query.resize(static_cast<size_t>(n));
    if (pending.size() >= kMaxPendingQueries) pending.erase(pending.begin());
    uint32_t id = next_query++;
    pending[id] = {from, from_size};
    mux.SendDns("dns", id, std::move(query));
  });
  // The port closes when the VM ends; a broken link ends the forwarder, and with it egress.
  auto ended = mux.Run(-1);
  if (!ended) fmt::print(stderr, "smolbox-agent: egress forwarder: {}\n", ended.error().ToString());
  _exit(ended ? 0 : 1);
}

}  // namespace

Expected<void> StartGuestEgress() {
  // Loaded only now, so that a boot without egress does not pay for them.
  SMOLBOX_TRY(LoadModules(std::string(kEgressSetupDir) + "/modules"));
  SMOLBOX_ASSIGN_OR_RETURN(auto sockets, confine::MakeEgressSockets());
  for (int fd : {sockets.tcp4.get(), sockets.tcp6.get(), sockets.dns.get()}) {
    if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  SMOLBOX_TRY(RunEgressSetup(sockets.tcp4_port, sockets.tcp6_port));
  std::string path = FindVirtioPort(egress_link::kEgressPortName);
  if (path.empty())
    return std::unexpected(Error{"egress", fmt::format("no virtio-serial port named {}", egress_link::kEgressPortName), 0});
  UniqueFd port(open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!port.valid()) return std::unexpected(Error::Sys("open " + path));
  pid_t pid = fork();
  if (pid < 0) return std::unexpected(Error::Sys("fork the egress forwarder"));
  if (pid == 0) {
    CloseAllBut({2, port.get(), sockets.tcp4.get(), sockets.tcp6.get(), sockets.dns.get()});
    Forward(sockets, std::move(port));
  }
  return {};
}

}  // namespace smolbox::agent
