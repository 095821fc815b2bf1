#include "battery/test_host.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

namespace smolvm_check {
namespace {

using smolbox::UniqueFd;

// 10.213.0.0/16 cut into /30s: room for far more concurrent cases than -j allows.
constexpr int kSlots = 1024;
constexpr char kLockDir[] = "/run/smolvm-check";

std::string SlotAddress(int slot, int host_part) {
  return fmt::format("10.213.{}.{}", slot / 64, (slot % 64) * 4 + host_part);
}

const char* IpBinary() {
  for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return nullptr;
}

// Runs iproute2 with a fixed environment; its output becomes the error's text on failure.
Expected<void> RunIp(const std::vector<std::string>& args) {
  const char* ip = IpBinary();
  if (ip == nullptr)
    return std::unexpected(Error{"test host", "iproute2's ip is not installed", 0});
  std::vector<char*> argv{const_cast<char*>(ip)};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  char path_env[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
  char* envp[] = {path_env, nullptr};

  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return std::unexpected(Error::Sys("pipe2"));
  UniqueFd read_end(p[0]), write_end(p[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), 2);
  pid_t pid = -1;
  int err = posix_spawn(&pid, ip, &actions, nullptr, argv.data(), envp);
  posix_spawn_file_actions_destroy(&actions);
  std::string step = fmt::format("ip {}", fmt::join(args, " "));
  if (err != 0) return std::unexpected(Error::Sys("posix_spawn " + step, err));
  write_end.Reset();

  std::string output;
  char buf[512];
  for (ssize_t n; (n = read(read_end.get(), buf, sizeof buf)) != 0;) {
    if (n > 0)
      output.append(buf, static_cast<size_t>(n));
    else if (errno != EINTR)
      break;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  while (!output.empty() && output.back() == '\n') output.pop_back();
  return std::unexpected(Error{step, output.empty() ? "failed" : output, 0});
}

// Whether any host interface already has an address in the slot's /30: someone else's network.
bool SubnetInUse(int slot) {
  in_addr base{};
  inet_pton(AF_INET, SlotAddress(slot, 0).c_str(), &base);
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool used = false;
  for (ifaddrs* a = list; a != nullptr && !used; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    uint32_t addr = ntohl(reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr);
    used = (addr & ~3u) == ntohl(base.s_addr);
  }
  freeifaddrs(list);
  return used;
}

// Takes the slot's lock file, or says the slot is busy. The lock is unlinked while held on
// release, so a taker must check that the file it locked is still the one at the path.
Expected<UniqueFd> TryLockSlot(const std::string& path) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (mkdir(kLockDir, 0700) != 0 && errno != EEXIST) {
      return std::unexpected(Error::Sys(fmt::format("mkdir {}", kLockDir)));
    }
    UniqueFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (!fd.valid()) {
      if (errno == ENOENT) continue;  // the directory went between mkdir and open
      return std::unexpected(Error::Sys("open " + path));
    }
    if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return UniqueFd();
    struct stat held {
    }, current{};
    if (fstat(fd.get(), &held) == 0 && stat(path.c_str(), &current) == 0 &&
        held.st_ino == current.st_ino && held.st_dev == current.st_dev) {
      return fd;
    }
  }
  return UniqueFd();
}

std::string LockPath(int slot) { return fmt::format("{}/testhost-{}.lock", kLockDir, slot); }

// The slots of namespaces this scheme named, whether in use or left by a crashed run.
std::vector<int> NamespaceSlots() {
  std::vector<int> slots;
  DIR* dir = opendir("/run/netns");
  if (dir == nullptr) return slots;
  while (dirent* e = readdir(dir)) {
    int slot = -1;
    char rest = 0;
    if (sscanf(e->d_name, "smolvm-check-%d%c", &slot, &rest) == 1 && slot >= 0 && slot < kSlots) {
      slots.push_back(slot);
    }
  }
  closedir(dir);
  return slots;
}

}  // namespace

std::unique_ptr<TestHost> TestHost::Take(int slot, UniqueFd lock) {
  std::unique_ptr<TestHost> host(new TestHost());
  host->slot_ = slot;
  host->lock_ = std::move(lock);
  host->lock_path_ = LockPath(slot);
  host->netns_ = fmt::format("smolvm-check-{}", slot);
  host->host_veth_ = fmt::format("smvc{}h", slot);
  host->peer_veth_ = fmt::format("smvc{}t", slot);
  return host;
}

// A namespace whose slot nobody holds is a crashed run's: taking the slot and letting it go
// tears it down.
void TestHost::SweepStale() {
  for (int slot : NamespaceSlots()) {
    auto lock = TryLockSlot(LockPath(slot));
    if (!lock || !lock->valid()) continue;
    auto stale = Take(slot, std::move(*lock));
    stale->netns_added_ = true;
  }
}

Expected<std::unique_ptr<TestHost>> TestHost::Create() {
  if (geteuid() != 0) return std::unexpected(Error{"test host", "needs root", EPERM});
  SweepStale();
  static std::atomic<int> counter{0};
  // Start where another process or case is unlikely to be, to keep lock contention low.
  int start = (static_cast<int>(getpid()) * 37 + counter.fetch_add(1) * 7) % kSlots;
  for (int i = 0; i < kSlots; ++i) {
    int slot = (start + i) % kSlots;
    SMOLBOX_ASSIGN_OR_RETURN(auto lock, TryLockSlot(LockPath(slot)));
    if (!lock.valid()) continue;
    auto host = Take(slot, std::move(lock));
    auto built = host->Build();
    if (!built) return std::unexpected(built.error());  // the destructor undoes the half built
    return host;
  }
  return std::unexpected(Error{"test host", "every address slot is busy", 0});
}

Expected<void> TestHost::Build() {
  // Holding the slot's lock, these names are ours: anything under them is a crashed run's.
  Teardown();
  if (SubnetInUse(slot_)) {
    return std::unexpected(
        Error{"test host", SlotAddress(slot_, 0) + "/30 is in use on the host", 0});
  }
  host_ip_ = SlotAddress(slot_, 1);
  ip_ = SlotAddress(slot_, 2);
  netns_added_ = true;
  const std::vector<std::vector<std::string>> steps = {
      {"netns", "add", netns_},
      {"link", "add", host_veth_, "type", "veth", "peer", "name", peer_veth_, "netns", netns_},
      {"addr", "add", host_ip_ + "/30", "dev", host_veth_},
      {"link", "set", host_veth_, "up"},
      {"-n", netns_, "addr", "add", ip_ + "/30", "dev", peer_veth_},
      {"-n", netns_, "link", "set", peer_veth_, "up"},
      {"-n", netns_, "link", "set", "lo", "up"},
  };
  for (const auto& step : steps) {
    SMOLBOX_TRY(RunIp(step));
  }
  return {};
}

TestHost::~TestHost() {
  if (netns_added_) Teardown();
  if (lock_.valid()) {
    unlink(lock_path_.c_str());  // while still locked; see TryLockSlot
    lock_.Reset();
    rmdir(kLockDir);  // fails while another slot is held, as it should
  }
}

void TestHost::Teardown() {
  // Deleting one end of a veth deletes both at once; the namespace alone would take its end
  // away only when the last socket inside it is gone, asynchronously.
  if (if_nametoindex(host_veth_.c_str()) != 0) (void)RunIp({"link", "del", host_veth_});
  std::string pinned = "/run/netns/" + netns_;
  if (access(pinned.c_str(), F_OK) == 0) (void)RunIp({"netns", "del", netns_});
}

Expected<UniqueFd> TestHost::ListenTcp() const {
  // setns() moves only the calling thread, so a short-lived thread enters the namespace; the
  // socket stays in the namespace it was created in wherever it is used afterwards.
  Expected<UniqueFd> result = std::unexpected(Error{"test host listener", "not run", 0});
  std::thread([&] {
    std::string path = "/run/netns/" + netns_;
    UniqueFd ns(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns.valid()) return void(result = std::unexpected(Error::Sys("open " + path)));
    if (setns(ns.get(), CLONE_NEWNET) != 0) {
      return void(result = std::unexpected(Error::Sys("setns " + path)));
    }
    UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return void(result = std::unexpected(Error::Sys("socket in " + netns_)));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    inet_pton(AF_INET, ip_.c_str(), &addr.sin_addr);
    if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      return void(result = std::unexpected(Error::Sys("bind " + ip_)));
    }
    if (listen(fd.get(), 64) != 0)
      return void(result = std::unexpected(Error::Sys("listen " + ip_)));
    result = std::move(fd);
  }).join();
  return result;
}

}  // namespace smolvm_check
