#include "guest_cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <string_view>

#include <fmt/format.h>

#include "mutant.h"

namespace smolbox::agent {
namespace {

constexpr int64_t kCpuPeriodUsec = 100000;

Expected<void> WriteAt(int dir, const char* file, const std::string& value) {
  UniqueFd fd(openat(dir, file, O_WRONLY | O_CLOEXEC));
  if (!fd.valid() || write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size())) {
    return std::unexpected(Error::Sys(fmt::format("write {} to cgroup {}", value, file)));
  }
  return {};
}

std::string ReadAt(int dir, const char* file) {
  UniqueFd fd(openat(dir, file, O_RDONLY | O_CLOEXEC));
  std::string text;
  char buf[1024];
  for (ssize_t n; fd.valid() && (n = read(fd.get(), buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  return text;
}

}  // namespace

Expected<WorkloadCgroup> WorkloadCgroup::Create(const std::string& root, const std::string& name, const CgroupLimits& limits) {
  UniqueFd root_fd(open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd.valid()) return std::unexpected(Error::Sys("open " + root));
  SMOLBOX_TRY(WriteAt(root_fd.get(), "cgroup.subtree_control", "+memory +pids +cpu"));
  if (mkdirat(root_fd.get(), name.c_str(), 0755) != 0 && errno != EEXIST) {
    return std::unexpected(Error::Sys("mkdir cgroup " + name));
  }
  UniqueFd dir(openat(root_fd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid()) return std::unexpected(Error::Sys("open cgroup " + name));
  // With a protection off (mutant.h) the cgroup still accounts, but holds no limit: in a VM
  // these switches are the guest's, as the host's cgroup then holds only QEMU.
  if (limits.memory_bytes > 0 && SMOLBOX_PROTECTED("memory_cgroup")) {
    SMOLBOX_TRY(WriteAt(dir.get(), "memory.max", std::to_string(limits.memory_bytes)));
    // One OOM kill ends the whole workload, as on the host: no half-killed process tree.
    SMOLBOX_TRY(WriteAt(dir.get(), "memory.oom.group", "1"));
  }
  if (limits.pids > 0 && SMOLBOX_PROTECTED("pids_cgroup")) {
    SMOLBOX_TRY(WriteAt(dir.get(), "pids.max", std::to_string(limits.pids)));
  }
  if (limits.cpus > 0 && SMOLBOX_PROTECTED("cpu_quota")) {
    auto quota = static_cast<int64_t>(limits.cpus * kCpuPeriodUsec);
    SMOLBOX_TRY(WriteAt(dir.get(), "cpu.max", fmt::format("{} {}", quota, kCpuPeriodUsec)));
  }
  UniqueFd procs(openat(dir.get(), "cgroup.procs", O_WRONLY | O_CLOEXEC));
  if (!procs.valid()) return std::unexpected(Error::Sys("open cgroup.procs of " + name));
  UniqueFd kill(openat(dir.get(), "cgroup.kill", O_WRONLY | O_CLOEXEC));
  if (!kill.valid()) return std::unexpected(Error::Sys("open cgroup.kill of " + name));
  return WorkloadCgroup(std::move(dir), std::move(procs), std::move(kill));
}

int64_t WorkloadCgroup::Field(const char* file, const char* key) const {
  std::string text = ReadAt(dir_.get(), file);
  std::string_view view(text);
  std::string needle = std::string(key) + " ";
  for (size_t at = 0; at < view.size();) {
    size_t end = view.find('\n', at);
    std::string_view line = view.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    if (line.starts_with(needle)) {
      int64_t value = 0;
      std::string_view number = line.substr(needle.size());
      std::from_chars(number.data(), number.data() + number.size(), value);
      return value;
    }
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  return 0;
}

CgroupCounters WorkloadCgroup::Read() const {
  return CgroupCounters{Field("memory.events", "oom_kill"), Field("pids.events", "max"), CpuUsec()};
}

void WorkloadCgroup::Kill() const {
  if (write(kill_.get(), "1", 1) != 1) fmt::print(stderr, "smolbox-agent: {}\n", Error::Sys("write cgroup.kill").ToString());
}

void WorkloadCgroup::Judge(const CgroupCounters& before, ExecReport& report) const {
  CgroupCounters after = Read();
  if (after.oom_kills > before.oom_kills && report.status == Status::kSignaled && report.signal == SIGKILL) {
    report.status = Status::kMemoryLimit;
  }
  if (after.pids_max_events > before.pids_max_events) report.limits_hit.push_back("pids");
  report.cpu_ms = std::max(report.cpu_ms, (after.cpu_usec - before.cpu_usec) / 1000);
  std::string peak = ReadAt(dir_.get(), "memory.peak");
  int64_t peak_bytes = 0;
  std::from_chars(peak.data(), peak.data() + peak.size(), peak_bytes);
  report.peak_memory_bytes = std::max(report.peak_memory_bytes, peak_bytes);
}

}  // namespace smolbox::agent
