#include "oci_bundle.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

namespace smolbox::testing {

using nlohmann::json;

json RuncSpecConfig() {
  return json::parse(R"({
    "ociVersion": "1.0.2",
    "process": {
      "terminal": false, "user": {"uid": 0, "gid": 0}, "args": ["sh"],
      "env": ["PATH=/bin", "TERM=xterm"], "cwd": "/",
      "capabilities": {"bounding": ["CAP_KILL"], "effective": ["CAP_KILL"], "permitted": ["CAP_KILL"]},
      "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}],
      "noNewPrivileges": true
    },
    "root": {"path": "rootfs", "readonly": true},
    "hostname": "runc",
    "mounts": [
      {"destination": "/proc", "type": "proc", "source": "proc"},
      {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
      {"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]},
      {"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
      {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]},
      {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]},
      {"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup", "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]}
    ],
    "linux": {
      "resources": {"devices": [{"allow": false, "access": "rwm"}]},
      "namespaces": [{"type": "pid"}, {"type": "network"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}],
      "maskedPaths": ["/proc/kcore", "/proc/keys"],
      "readonlyPaths": ["/proc/sys", "/proc/sysrq-trigger"]
    }
  })");
}

OciBundle::OciBundle() {
  // busybox-static: one static binary that is every command the tests run.
  std::filesystem::create_directories(rootfs() + "/bin");
  std::filesystem::create_directories(rootfs() + "/etc");
  std::filesystem::copy_file("/bin/busybox", rootfs() + "/bin/busybox");
  for (const char* applet :
       {"sh", "echo", "cat", "sleep", "id", "hostname", "ls", "head", "tr", "seq", "touch", "dd"}) {
    std::filesystem::create_symlink("busybox", rootfs() + "/bin/" + applet);
  }
  // A file of the image's root that only its root may read: the sandbox's root must read it.
  dir_.Write("rootfs/etc/shadow", "root-only\n");
  chmod((rootfs() + "/etc/shadow").c_str(), 0600);
}

void UnmountEverythingUnder(const std::string& dir) {
  std::ifstream mounts("/proc/self/mounts");
  std::vector<std::string> points;
  for (std::string device, point, rest; mounts >> device >> point && std::getline(mounts, rest);) {
    if (point.starts_with(dir + "/")) points.push_back(point);
  }
  std::sort(points.rbegin(), points.rend());
  for (const auto& point : points) umount2(point.c_str(), MNT_DETACH);
}

void OciBundle::Save() const { dir_.Write("config.json", config.dump(2)); }

}  // namespace smolbox::testing
