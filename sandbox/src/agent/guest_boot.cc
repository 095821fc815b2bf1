#include "guest_boot.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "guest_protocol.h"
#include "mount.h"
#include "net.h"

namespace smolbox::agent {
namespace {

using Clock = std::chrono::steady_clock;

// Devices appear as their drivers probe; under emulation that can take a while.
constexpr auto kDeviceWait = std::chrono::seconds(20);
constexpr const char* kModuleDir = "/modules";
constexpr const char* kImageDevice = "/dev/vda";
constexpr const char* kImageMount = "/image";
constexpr const char* kHostView = "/run/host";

Expected<void> Mount(const char* source, const std::string& target, const char* type, unsigned long flags,
                     const char* data = nullptr) {
  if (mount(source, target.c_str(), type, flags, data) != 0) {
    return std::unexpected(Error::Sys(fmt::format("mount {} on {}", type != nullptr ? type : source, target)));
  }
  return {};
}

Expected<void> MountKernelFilesystems() {
  SMOLBOX_TRY(Mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC));
  SMOLBOX_TRY(Mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC));
  return Mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755");
}

// The kernel starts init with no fds when the initramfs has no /dev/console; the console
// is where the agent's own errors belong (the host keeps it as the VM's log).
void AttachConsole() {
  int fd = open("/dev/console", O_RDWR | O_NOCTTY);
  if (fd < 0) return;
  for (int target = 0; target <= 2; ++target) {
    if (fcntl(target, F_GETFD) < 0) dup2(fd, target);
  }
  if (fd > 2) close(fd);
}

}  // namespace

Expected<void> LoadModules(const std::string& dir) {
  std::ifstream order(fmt::format("{}/order", dir));
  if (!order) return {};  // a kernel with everything built in
  for (std::string name; std::getline(order, name);) {
    if (name.empty()) continue;
    std::string path = fmt::format("{}/{}", dir, name);
    UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return std::unexpected(Error::Sys("open module " + path));
    if (syscall(SYS_finit_module, fd.get(), "", 0) != 0 && errno != EEXIST) {
      return std::unexpected(Error::Sys("finit_module " + name));
    }
  }
  return {};
}

namespace {

// Polls `found` until it gives a non-empty path or the wait is over.
std::string WaitFor(std::string (*found)()) {
  auto deadline = Clock::now() + kDeviceWait;
  for (;;) {
    std::string path = found();
    if (!path.empty() || Clock::now() > deadline) return path;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::string ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string FindAgentPort() { return FindVirtioPort(kAgentPortName); }

Expected<UniqueFd> OpenChannel() {
  std::string port = WaitFor(FindAgentPort);
  if (port.empty()) return std::unexpected(Error{"channel", fmt::format("no virtio-serial port named {}", kAgentPortName), 0});
  UniqueFd fd(open(port.c_str(), O_RDWR | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid()) return std::unexpected(Error::Sys("open " + port));
  return fd;
}

Expected<void> MountImage() {
  std::string device = WaitFor([] { return access(kImageDevice, R_OK) == 0 ? std::string(kImageDevice) : std::string(); });
  if (device.empty()) return std::unexpected(Error{"rootfs", fmt::format("{} did not appear", kImageDevice), 0});
  return Mount(kImageDevice, kImageMount, "erofs", MS_RDONLY | MS_NODEV);
}

Expected<void> BindReadOnly(const std::string& source, const std::string& target) {
  SMOLBOX_TRY(Mount(source.c_str(), target, nullptr, MS_BIND | MS_REC));
  return Mount("none", target, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NODEV);
}

// The image's top-level trees, as a host has them: directories bound read-only, symlinks
// (merged /usr: /bin -> usr/bin) recreated.
Expected<void> MirrorImage(const std::string& view) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(kImageMount), closedir);
  if (!dir) return std::unexpected(Error::Sys("open the rootfs image"));
  while (dirent* entry = readdir(dir.get())) {
    std::string name = entry->d_name;
    if (name == "." || name == ".." || name == "proc" || name == "sys" || name == "dev" || name == "etc" || name == "tmp" || name == "image") continue;
    std::string source = fmt::format("{}/{}", kImageMount, name);
    std::string target = fmt::format("{}/{}", view, name);
    struct stat st{};
    if (lstat(source.c_str(), &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      char link[4096];
      ssize_t n = readlink(source.c_str(), link, sizeof link - 1);
      if (n < 0 || symlink(std::string(link, static_cast<size_t>(n)).c_str(), target.c_str()) != 0) {
        return std::unexpected(Error::Sys("recreate the image's /" + name));
      }
    } else if (S_ISDIR(st.st_mode)) {
      if (mkdir(target.c_str(), 0755) != 0) return std::unexpected(Error::Sys("mkdir " + target));
      SMOLBOX_TRY(BindReadOnly(source, target));
    }
  }
  // The loader cache is all of /etc the namespace code takes from its host.
  std::string etc = view + "/etc";
  if (mkdir(etc.c_str(), 0755) != 0) return std::unexpected(Error::Sys("mkdir " + etc));
  std::string cache = fmt::format("{}/etc/ld.so.cache", kImageMount);
  if (access(cache.c_str(), R_OK) == 0) {
    UniqueFd file(open((etc + "/ld.so.cache").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
    if (!file.valid()) return std::unexpected(Error::Sys("create /etc/ld.so.cache"));
    SMOLBOX_TRY(BindReadOnly(cache, etc + "/ld.so.cache"));
  }
  // And its CA trust store, which the workload's root takes as the ns backend takes the host's.
  return confine::MirrorTrustStore(fmt::format("{}/etc", kImageMount), etc);
}

// The initramfs's egress setup and its libraries, which the host view would otherwise leave
// behind: the agent runs it at a setup with egress (guest_egress.h).
Expected<void> KeepEgressSetup(const std::string& view) {
  if (access(kEgressSetupDir, X_OK) != 0) return {};  // a guest built without it
  std::string target = view + kEgressSetupDir;
  if (mkdir(target.c_str(), 0755) != 0) return std::unexpected(Error::Sys("mkdir " + target));
  return BindReadOnly(kEgressSetupDir, target);
}

// Moves the agent onto a tmpfs laid out like a host, leaving the initramfs behind: pivot_root
// refuses to pivot away from the initramfs, and the workload's root needs a pivot.
Expected<void> EnterHostView() {
  if (mkdir("/run", 0755) != 0 && errno != EEXIST) return std::unexpected(Error::Sys("mkdir /run"));
  if (mkdir(kHostView, 0755) != 0) return std::unexpected(Error::Sys(fmt::format("mkdir {}", kHostView)));
  SMOLBOX_TRY(Mount("tmpfs", kHostView, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755"));
  const std::string view = kHostView;
  SMOLBOX_TRY(MirrorImage(view));
  SMOLBOX_TRY(KeepEgressSetup(view));
  // The whole image too: a setup whose disk is a store image makes the workload's root of it
  // (guest_run.cc).
  std::string image = view + kImageMount;
  if (mkdir(image.c_str(), 0755) != 0) return std::unexpected(Error::Sys("mkdir " + image));
  SMOLBOX_TRY(BindReadOnly(kImageMount, image));
  for (const char* dir : {"proc", "sys", "dev", "newroot", "storage", "volumes", "tmp"}) {
    if (mkdir((view + "/" + dir).c_str(), 0755) != 0) return std::unexpected(Error::Sys(fmt::format("mkdir /{}", dir)));
  }
  for (const char* dir : {"/proc", "/sys", "/dev"}) {
    SMOLBOX_TRY(Mount(dir, view + dir, nullptr, MS_MOVE));
  }
  if (chdir(kHostView) != 0) return std::unexpected(Error::Sys("chdir host view"));
  SMOLBOX_TRY(Mount(".", "/", nullptr, MS_MOVE));
  if (chroot(".") != 0 || chdir("/") != 0) return std::unexpected(Error::Sys("chroot into the host view"));
  return {};
}

}  // namespace

// /dev/vportNpM of the port whose name is name.
std::string FindVirtioPort(const char* name) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir("/sys/class/virtio-ports"), closedir);
  if (!dir) return {};
  while (dirent* entry = readdir(dir.get())) {
    std::string port = entry->d_name;
    if (port.starts_with(".")) continue;
    if (ReadLine(fmt::format("/sys/class/virtio-ports/{}/name", port)) != name) continue;
    std::string node = "/dev/" + port;
    if (access(node.c_str(), R_OK | W_OK) == 0) return node;
  }
  return {};
}

bool StartedAsGuestInit(int argc) { return getpid() == 1 && argc <= 1; }

Expected<UniqueFd> BootGuest() {
  SMOLBOX_TRY(MountKernelFilesystems());
  AttachConsole();
  SMOLBOX_TRY(LoadModules(kModuleDir));
  if (sethostname(kGuestHostname, strlen(kGuestHostname)) != 0) return std::unexpected(Error::Sys("sethostname"));
  SMOLBOX_TRY(confine::BringUpLoopback());
  auto channel = OpenChannel();
  if (!channel) return channel;
  SMOLBOX_TRY(MountImage());
  if (auto ok = Mount("cgroup2", kGuestCgroupRoot, "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC); !ok) {
    return std::unexpected(ok.error());
  }
  SMOLBOX_TRY(EnterHostView());
  return channel;
}

void PowerOff() {
  sync();
  reboot(RB_POWER_OFF);
  reboot(RB_AUTOBOOT);  // -no-reboot turns a reboot into QEMU's exit too
  _exit(1);             // init exiting panics the kernel; panic=-1 ends the VM all the same
}

}  // namespace smolbox::agent
