#include "launch/net_cgroup.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "cgroup_hierarchies.h"
#include "launch/host_files.h"
#include "unique_fd.h"

namespace smolvm_check {

namespace {

using smolbox::UniqueFd;
using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// Small file helpers. Cgroup files want one write() each and report errors through its errno.

bool WriteFile(const std::string& path, const std::string& value) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  return fd.valid() &&
         write(fd.get(), value.data(), value.size()) == static_cast<ssize_t>(value.size());
}

std::vector<std::string> Words(const std::string& text, char sep = 0) {
  std::vector<std::string> words;
  std::istringstream in(text);
  if (sep == 0) {
    for (std::string w; in >> w;) words.push_back(w);
  } else {
    for (std::string w; std::getline(in, w, sep);) words.push_back(w);
  }
  return words;
}

bool HasWord(const std::string& text, const std::string& word) {
  auto words = Words(text);
  return std::find(words.begin(), words.end(), word) != words.end();
}

std::string RandomSuffix() {
  uint64_t r = 0;
  if (getrandom(&r, sizeof r, 0) != sizeof r) {
    r = static_cast<uint64_t>(getpid()) ^ Clock::now().time_since_epoch().count();
  }
  return fmt::format("{:016x}", r);
}

std::vector<pid_t> ReadPids(const std::string& procs_file) {
  std::vector<pid_t> pids;
  for (const auto& w : Words(ReadUpTo(procs_file))) pids.push_back(std::stoi(w));
  return pids;
}

bool RemoveDir(const std::string& path) {
  // rmdir fails with EBUSY until the last exiting task has left; that takes milliseconds.
  for (int i = 0; i < 200; ++i) {
    if (rmdir(path.c_str()) == 0 || errno == ENOENT) return true;
    if (errno != EBUSY) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace

NetCgroup::NetCgroup(const NetLimits& limits) : name_("smolvm-check-" + RandomSuffix()) {
  if (geteuid() != 0) {
    problems_.push_back("not root");
    return;
  }
  smolbox::CgroupHierarchies h = smolbox::DiscoverCgroupHierarchies();
  CreateV2(h);
  auto limit = [&](const std::string& controller, const std::string& v2_file,
                   const std::string& v1_file, int64_t value) {
    auto dir = PlaceController(h, controller);
    if (!dir) return;
    std::string file = dir->path + "/" + (dir->version == 2 ? v2_file : v1_file);
    if (!WriteFile(file, std::to_string(value))) {
      problems_.push_back(fmt::format("cannot write {} ({})", file, strerror(errno)));
    }
  };
  limit("pids", "pids.max", "pids.max", limits.pids);
  limit("memory", "memory.max", "memory.limit_in_bytes", limits.memory_bytes);
  for (const auto& d : dirs_) paths_.push_back(d.path);
}

// v2 holds the tree even without controllers (hybrid hosts): cgroup.procs lists it and
// cgroup.kill kills it atomically. Runs go under one subtree at the top, which may enable
// controllers whatever process layout the host has.
void NetCgroup::CreateV2(const smolbox::CgroupHierarchies& h) {
  if (!h.v2_mount) return;
  v2_base_ = *h.v2_mount + "/smolvm-check";
  std::string available = ReadUpTo(*h.v2_mount + "/cgroup.controllers");
  // Another net may remove the shared base between our mkdir of it and of our own directory.
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (mkdir(v2_base_.c_str(), 0755) != 0 && errno != EEXIST) break;
    for (const char* c : {"pids", "memory"}) {
      if (!HasWord(available, c)) continue;
      WriteFile(*h.v2_mount + "/cgroup.subtree_control", fmt::format("+{}", c));
      WriteFile(v2_base_ + "/cgroup.subtree_control", fmt::format("+{}", c));
    }
    std::string path = v2_base_ + "/" + name_;
    if (mkdir(path.c_str(), 0755) == 0) return dirs_.push_back({path, 2});
    if (errno != ENOENT) break;
  }
  problems_.push_back(
      fmt::format("cannot create a cgroup under {} ({})", v2_base_, strerror(errno)));
}

std::optional<NetCgroup::Dir> NetCgroup::PlaceController(const smolbox::CgroupHierarchies& h,
                                                         const std::string& controller) {
  if (!dirs_.empty() && dirs_[0].version == 2 &&
      HasWord(ReadUpTo(v2_base_ + "/cgroup.subtree_control"), controller)) {
    return dirs_[0];
  }
  auto mount = h.v1_mount.find(controller);
  if (mount == h.v1_mount.end()) {
    problems_.push_back(fmt::format("no cgroup holds the {} controller", controller));
    return std::nullopt;
  }
  // Under our own v1 cgroup, so that whatever limits the runner lives under still apply.
  auto self = h.v1_self.find(controller);
  std::string path =
      fmt::format("{}{}/{}", mount->second, self == h.v1_self.end() ? "" : self->second, name_);
  if (mkdir(path.c_str(), 0755) != 0) {
    problems_.push_back(fmt::format("cannot create {} ({})", path, strerror(errno)));
    return std::nullopt;
  }
  dirs_.push_back({path, 1});
  return dirs_.back();
}

NetCgroup::~NetCgroup() {
  KillAndWait();
  for (const auto& d : dirs_) {
    if (!RemoveDir(d.path))
      fmt::print(stderr, "smolvm-check: cannot remove {}: {}\n", d.path, strerror(errno));
  }
  // Shared by concurrent nets: it goes with the last one.
  if (!v2_base_.empty()) rmdir(v2_base_.c_str());
}

Expected<void> NetCgroup::Add(pid_t pid) const {
  for (const auto& d : dirs_) {
    if (!WriteFile(d.path + "/cgroup.procs", std::to_string(pid))) {
      return std::unexpected(Error::Sys("write " + d.path + "/cgroup.procs"));
    }
  }
  return {};
}

std::vector<pid_t> NetCgroup::Procs() const {
  std::set<pid_t> all;
  for (const auto& d : dirs_) {
    for (pid_t pid : ReadPids(d.path + "/cgroup.procs")) all.insert(pid);
  }
  return {all.begin(), all.end()};
}

void NetCgroup::Kill() const {
  for (const auto& d : dirs_) {
    if (d.version == 2 && WriteFile(d.path + "/cgroup.kill", "1")) continue;
    for (pid_t pid : ReadPids(d.path + "/cgroup.procs")) {
      if (pid > 1) kill(pid, SIGKILL);
    }
  }
}

void NetCgroup::KillAndWait() const {
  for (int round = 0; round < 500 && !Procs().empty(); ++round) {
    Kill();
    std::this_thread::sleep_for(std::chrono::milliseconds(round < 10 ? 1 : 10));
  }
}

}  // namespace smolvm_check
