// The vm backend's needs: a QEMU that has the microvm machine, and the guest artifacts.
// QEMU is looked up on PATH even when replaying a fixture: it is a fact of the installation,
// not of /proc, /sys or /dev.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <sstream>

#include "probe.h"

extern char** environ;

namespace smolbox::host {
namespace {

constexpr const char* kQemu = "qemu-system-x86_64";
// The names scripts/build-guest gives its outputs.
constexpr const char* kArtifacts[] = {"vmlinux", "initramfs.cpio", "rootfs.erofs"};

std::string FindOnPath(const std::string& path, const std::string& program) {
  std::istringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + program;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

// Its stdout and stderr, killed after timeout_ms: a QEMU that hangs must not hang the probe.
std::string RunCapture(const std::vector<std::string>& argv, int timeout_ms) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return "";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  std::string output;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (rc == 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fds[0], POLLIN, 0};
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      kill(pid, SIGKILL);
      break;
    }
    char buf[4096];
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    output.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (rc == 0) waitpid(pid, nullptr, 0);
  return output;
}

void QemuChecks(const ProbeOptions& options, Section& section, Findings& found) {
  std::string qemu = FindOnPath(options.path, kQemu);
  found.qemu = !qemu.empty();
  if (!found.qemu) {
    section.checks.push_back(
        Warn("QEMU", fmt::format("no {} on PATH", kQemu), "apt-get install qemu-system-x86"));
    section.checks.push_back(Warn("microvm machine", "no QEMU to ask"));
    return;
  }
  std::string version = RunCapture({qemu, "--version"}, 10000);
  version = Trim(version.substr(0, version.find('\n')));
  section.checks.push_back(
      Pass("QEMU", fmt::format("{} ({})", version.empty() ? "no version" : version, qemu)));
  found.qemu_microvm =
      RunCapture({qemu, "-machine", "help"}, 10000).find("microvm") != std::string::npos;
  if (found.qemu_microvm) {
    section.checks.push_back(Pass("microvm machine", "listed by -machine help"));
  } else {
    section.checks.push_back(
        Warn("microvm machine", "not listed by -machine help", "QEMU 4.2 or later has it"));
  }
}

Check ArtifactsCheck(const ProbeOptions& options, Findings& found) {
  const char* name = "guest artifacts";
  std::vector<std::string> missing;
  for (const char* artifact : kArtifacts) {
    struct stat st {};
    if (options.guest_dir.empty() || stat((options.guest_dir + "/" + artifact).c_str(), &st) != 0) {
      missing.push_back(artifact);
    }
  }
  found.guest_artifacts = missing.empty();
  if (found.guest_artifacts) return Pass(name, fmt::format("in {}", options.guest_dir));
  std::string where =
      options.guest_dir.empty() ? "no guest directory (HOME unset)" : options.guest_dir;
  return Warn(
      name, fmt::format("guest artifacts not built: no {} in {}", fmt::join(missing, ", "), where),
      "build them: scripts/build-guest");
}

}  // namespace

Section ProbeVmNeeds(const ProbeOptions& options, Findings& found) {
  Section section{"VM backend", {}};
  QemuChecks(options, section, found);
  section.checks.push_back(ArtifactsCheck(options, found));
  return section;
}

}  // namespace smolbox::host
