#include "cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

#include <chrono>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "cgroup_hierarchies.h"
#include "host_root.h"
#include "mutant.h"

namespace smolbox::shared {
namespace {

constexpr int64_t kCpuPeriodUs = 100000;

using Hierarchies = CgroupHierarchies;

bool WriteFile(const std::string& path, const std::string& value) {
  std::ofstream out(path);
  out << value;
  out.flush();
  return static_cast<bool>(out);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// "key value" lines, as in memory.events, pids.events and cpu.stat.
std::optional<int64_t> ReadKey(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string k;
  int64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return std::nullopt;
}

std::optional<int64_t> ReadNumber(const std::string& path) {
  std::ifstream in(path);
  int64_t v = 0;
  if (in >> v) return v;
  return std::nullopt;
}

bool HasWord(const std::string& text, const std::string& word) {
  std::istringstream in(text);
  for (std::string w; in >> w;) {
    if (w == word) return true;
  }
  return false;
}

// v2: where runs go. As root, a `smolbox` subtree at the top of the hierarchy, which may hold
// controllers whatever process layout systemd has; rootless, only a delegated own cgroup.
std::optional<std::string> V2Base(const Hierarchies& h, const std::vector<std::string>& wanted) {
  if (!h.v2_mount) return std::nullopt;
  std::string top = *h.v2_mount;
  std::string available = ReadFile(top + "/cgroup.controllers");
  bool host_root = IsHostRoot();
  std::string base = host_root ? top + "/smolbox" : top + h.v2_self;
  if (host_root && mkdir(base.c_str(), 0755) != 0 && errno != EEXIST) return std::nullopt;
  if (access((base + "/cgroup.subtree_control").c_str(), W_OK) != 0) return std::nullopt;
  for (const auto& c : wanted) {
    if (!HasWord(available, c)) continue;
    if (host_root) WriteFile(top + "/cgroup.subtree_control", "+" + c);
    WriteFile(base + "/cgroup.subtree_control", "+" + c);
  }
  return base;
}

bool V2Enabled(const std::string& base, const std::string& controller) {
  return HasWord(ReadFile(base + "/cgroup.subtree_control"), controller);
}

std::string RunName(const std::string& run_id) { return "smolbox-" + run_id; }

bool RemoveDir(const std::string& path) {
  // rmdir fails with EBUSY until the last exiting task has left; it takes milliseconds.
  for (int i = 0; i < 100; ++i) {
    if (rmdir(path.c_str()) == 0 || errno == ENOENT) return true;
    if (errno != EBUSY) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Every directory called `name` in the tree under `dir`, down to `depth` levels. cgroupfs holds
// no symlinks, and the walk does not descend into what it found.
void FindNamed(const std::string& dir, const std::string& name, int depth, std::vector<std::string>& found) {
  if (depth == 0) return;
  DIR* listing = opendir(dir.c_str());
  if (!listing) return;
  while (dirent* entry = readdir(listing)) {
    std::string child = entry->d_name;
    if (entry->d_type != DT_DIR || child == "." || child == "..") continue;
    if (child == name) {
      found.push_back(dir + "/" + child);
    } else {
      FindNamed(dir + "/" + child, name, depth - 1, found);
    }
  }
  closedir(listing);
}

void KillDir(const std::string& path, int version) {
  if (version == 2 && WriteFile(path + "/cgroup.kill", "1")) return;
  // v1 has no cgroup.kill: repeat until the list stays empty, since a fork may race the scan.
  for (int round = 0; round < 50; ++round) {
    std::ifstream procs(path + "/cgroup.procs");
    bool any = false;
    for (pid_t pid; procs >> pid;) {
      kill(pid, SIGKILL);
      any = true;
    }
    if (!any) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Whether a /proc/<pid>/cgroup listing puts the process at `path` in the hierarchy of
// `controller`; the empty controller is v2's.
bool Lists(const std::string& listing, const std::string& controller, const std::string& path) {
  CgroupHierarchies h = ParseCgroupHierarchies("", listing);
  if (controller.empty()) return !path.empty() && h.v2_self == path;
  auto in_v1 = h.v1_self.find(controller);
  return in_v1 != h.v1_self.end() && in_v1->second == path;
}

}  // namespace

long CgroupEntry::Clone(unsigned long flags, int* pidfd) const {
  if (v2_dir_.valid()) {
    clone_args args{};
    args.flags = (flags & ~static_cast<unsigned long>(CSIGNAL)) | CLONE_INTO_CGROUP;
    args.exit_signal = flags & CSIGNAL;
    args.pidfd = reinterpret_cast<uint64_t>(pidfd);
    args.cgroup = static_cast<uint64_t>(v2_dir_.get());
    long pid = syscall(SYS_clone3, &args, sizeof args);
    if (pid >= 0) return pid;
    // Kernels before 5.7 lack it; whatever else refused it, the parent's EnsureHolds moves
    // the child in the slow way.
  }
  return syscall(SYS_clone, flags, nullptr, pidfd, nullptr, 0);
}

void CgroupEntry::JoinSelf() {
  for (auto& tasks : v1_tasks_) {
    // "0" is the writer, and `tasks` moves a single thread: together they spare the
    // thread-group lock that a pid, or cgroup.procs, takes.
    [[maybe_unused]] ssize_t n = write(tasks.get(), "0", 1);
    tasks.Reset();
  }
  v2_dir_.Reset();
}

Cgroup Cgroup::Create(const std::string& run_id, const CgroupLimits& limits) {
  Cgroup cg;
  Hierarchies h = DiscoverCgroupHierarchies();
  std::optional<std::string> v2 = V2Base(h, {"memory", "cpu", "pids"});
  auto place = [&](const std::string& controller) -> std::optional<Dir> {
    if (v2 && V2Enabled(*v2, controller)) {
      std::string path = *v2 + "/" + RunName(run_id);
      if (mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return Dir{path, 2, path.substr(h.v2_mount->size())};
    }
    if (auto mount = h.v1_mount.find(controller); mount != h.v1_mount.end()) {
      std::string in_hierarchy = h.v1_self[controller] + "/" + RunName(run_id);
      std::string path = mount->second + in_hierarchy;
      if (mkdir(path.c_str(), 0755) == 0) return Dir{path, 1, in_hierarchy};
      cg.problems_.push_back(fmt::format("{}: cannot create a cgroup under {} ({})", controller,
                                         mount->second, strerror(errno)));
      return std::nullopt;
    }
    cg.problems_.push_back(fmt::format("{}: no writable cgroup v2 subtree or v1 hierarchy", controller));
    return std::nullopt;
  };
  cg.memory_ = place("memory");
  cg.cpu_ = place("cpu");
  cg.pids_ = place("pids");
  if (cg.cpu_ && cg.cpu_->version == 2) cg.cpuacct_ = cg.cpu_;
  else if (auto acct = h.v1_mount.find("cpuacct"); acct != h.v1_mount.end()) {
    std::string in_hierarchy = h.v1_self["cpuacct"] + "/" + RunName(run_id);
    std::string path = acct->second + in_hierarchy;
    if (path == (cg.cpu_ ? cg.cpu_->path : "") || mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) {
      cg.cpuacct_ = Dir{path, 1, in_hierarchy};
    }
  }
  cg.ApplyLimits(limits);
  return cg;
}

Cgroup::Cgroup(Cgroup&& other) noexcept
    : memory_(std::move(other.memory_)),
      cpu_(std::move(other.cpu_)),
      cpuacct_(std::move(other.cpuacct_)),
      pids_(std::move(other.pids_)),
      problems_(std::move(other.problems_)) {
  other.memory_.reset();
  other.cpu_.reset();
  other.cpuacct_.reset();
  other.pids_.reset();
}

Cgroup::~Cgroup() { Destroy(); }

void Cgroup::ApplyLimits(const CgroupLimits& limits) {
  auto fail = [this](const std::string& what) {
    problems_.push_back(fmt::format("could not set {} ({})", what, strerror(errno)));
  };
  // With a protection off (mutant.h) the cgroup still accounts, but holds no limit.
  const bool memory = memory_ && SMOLBOX_PROTECTED("memory_cgroup");
  const bool cpu = cpu_ && SMOLBOX_PROTECTED("cpu_quota");
  const bool pids = pids_ && SMOLBOX_PROTECTED("pids_cgroup");
  if (memory && memory_->version == 2) {
    if (!WriteFile(memory_->path + "/memory.max", std::to_string(limits.memory_bytes))) fail("memory.max");
    WriteFile(memory_->path + "/memory.swap.max", "0");  // absent without swap accounting
  } else if (memory) {
    const std::string& p = memory_->path;
    if (!WriteFile(p + "/memory.limit_in_bytes", std::to_string(limits.memory_bytes))) fail("memory.limit_in_bytes");
    // memsw is memory plus swap: equal to the memory limit means no swap at all.
    WriteFile(p + "/memory.memsw.limit_in_bytes", std::to_string(limits.memory_bytes));
    WriteFile(p + "/memory.swappiness", "0");
  }
  int64_t quota = std::max<int64_t>(1000, std::llround(limits.cpus * kCpuPeriodUs));
  if (cpu && cpu_->version == 2) {
    if (!WriteFile(cpu_->path + "/cpu.max", fmt::format("{} {}", quota, kCpuPeriodUs))) fail("cpu.max");
  } else if (cpu) {
    WriteFile(cpu_->path + "/cpu.cfs_period_us", std::to_string(kCpuPeriodUs));
    if (!WriteFile(cpu_->path + "/cpu.cfs_quota_us", std::to_string(quota))) fail("cpu.cfs_quota_us");
  }
  if (cpu && limits.cpu_shares > 0 && cpu_->version == 2) {
    int64_t weight = 1 + ((limits.cpu_shares - 2) * 9999) / 262142;
    if (!WriteFile(cpu_->path + "/cpu.weight", std::to_string(weight))) fail("cpu.weight");
  } else if (cpu && limits.cpu_shares > 0) {
    if (!WriteFile(cpu_->path + "/cpu.shares", std::to_string(limits.cpu_shares))) fail("cpu.shares");
  }
  if (pids && !WriteFile(pids_->path + "/pids.max", std::to_string(limits.pids))) fail("pids.max");
}

std::string Cgroup::Describe() const {
  auto one = [](const char* name, const std::optional<Dir>& d) {
    return d ? fmt::format("{}=v{}", name, d->version) : fmt::format("{}=none", name);
  };
  return fmt::format("{} {} {}", one("memory", memory_), one("cpu", cpu_), one("pids", pids_));
}

std::vector<std::pair<const char*, const Cgroup::Dir*>> Cgroup::Dirs() const {
  std::vector<std::pair<const char*, const Dir*>> dirs;
  std::set<std::string> seen;
  for (const auto& [controller, d] : {std::pair{"memory", &memory_}, {"cpu", &cpu_}, {"cpuacct", &cpuacct_},
                                      {"pids", &pids_}}) {
    if (*d && seen.insert((*d)->path).second) dirs.emplace_back(controller, &**d);
  }
  return dirs;
}

CgroupEntry Cgroup::OpenEntry() const {
  CgroupEntry entry;
  for (const auto& [controller, d] : Dirs()) {
    if (d->version == 2) {
      entry.v2_dir_.Reset(open(d->path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      continue;
    }
    // Write-only: the child gets no way to read or enumerate the host's cgroups.
    UniqueFd tasks(open((d->path + "/tasks").c_str(), O_WRONLY | O_CLOEXEC));
    if (tasks.valid()) entry.v1_tasks_.push_back(std::move(tasks));
  }
  return entry;
}

Expected<void> Cgroup::EnsureHolds(pid_t pid) {
  std::string listing = ReadFile(fmt::format("/proc/{}/cgroup", pid));
  for (const auto& [controller, d] : Dirs()) {
    if (Lists(listing, d->version == 2 ? "" : controller, d->in_hierarchy)) continue;
    // The slow way: the whole thread group, from outside.
    if (!WriteFile(d->path + "/cgroup.procs", std::to_string(pid))) {
      return std::unexpected(Error::Sys("write " + d->path + "/cgroup.procs"));
    }
  }
  return {};
}

std::optional<int64_t> Cgroup::CpuUsageMs() const {
  if (!cpuacct_) return std::nullopt;
  if (cpuacct_->version == 2) {
    auto usec = ReadKey(cpuacct_->path + "/cpu.stat", "usage_usec");
    if (usec) return *usec / 1000;
    return std::nullopt;
  }
  auto nsec = ReadNumber(cpuacct_->path + "/cpuacct.usage");
  if (nsec) return *nsec / 1000000;
  return std::nullopt;
}

int64_t Cgroup::OomKills() const {
  if (!memory_) return 0;
  std::string file = memory_->version == 2 ? "/memory.events" : "/memory.oom_control";
  return ReadKey(memory_->path + file, "oom_kill").value_or(0);
}

int64_t Cgroup::PeakMemoryBytes() const {
  if (!memory_) return 0;
  std::string file = memory_->version == 2 ? "/memory.peak" : "/memory.max_usage_in_bytes";
  return ReadNumber(memory_->path + file).value_or(0);
}

int64_t Cgroup::PidsMaxEvents() const {
  return pids_ ? ReadKey(pids_->path + "/pids.events", "max").value_or(0) : 0;
}

void Cgroup::KillAll() const {
  std::set<std::string> done;
  for (const auto* d : {&pids_, &memory_, &cpu_, &cpuacct_}) {
    if (*d && done.insert((*d)->path).second) KillDir((*d)->path, (*d)->version);
  }
}

void Cgroup::Destroy() {
  KillAll();
  std::set<std::string> done;
  for (auto* d : {&memory_, &cpu_, &cpuacct_, &pids_}) {
    if (*d && done.insert((*d)->path).second) RemoveDir((*d)->path);
    d->reset();
  }
}

void RemoveStaleCgroups(const std::string& run_id) {
  // A v1 run cgroup sits under the cgroup of the runtime that made it, and the sweeper may live
  // in another one (a later login, job or service), so each hierarchy is searched for it.
  Hierarchies h = DiscoverCgroupHierarchies();
  std::vector<std::pair<std::string, int>> roots;
  if (h.v2_mount) roots.emplace_back(*h.v2_mount, 2);
  std::set<std::string> v1_mounts;
  for (const auto& [controller, mount] : h.v1_mount) {
    if (v1_mounts.insert(mount).second) roots.emplace_back(mount, 1);
  }
  for (const auto& [root, version] : roots) {
    std::vector<std::string> found;
    FindNamed(root, RunName(run_id), 8, found);
    for (const auto& path : found) {
      KillDir(path, version);
      RemoveDir(path);
    }
  }
}

}  // namespace smolbox::shared
