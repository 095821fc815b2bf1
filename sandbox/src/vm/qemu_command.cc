#include "qemu_command.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <regex>

#include <fmt/format.h>

#include "cache_files.h"
#include "egress_link.h"
#include "mutant.h"
#include "program.h"
#include "state.h"
#include "unique_fd.h"

namespace smolbox::vm {
namespace {

constexpr const char* kQemuName = "qemu-system-x86_64";
constexpr int kVersionTimeoutMs = 5000;
// QEMU's translation cache defaults to 1 GiB under TCG; 64 MiB keeps its RSS near guest RAM.
constexpr int kTcgCacheMiB = 64;

// What `path --version` prints. That is a whole QEMU start, ~10 ms of every VM, so the answer
// is kept in the cache dir for the binary it came from; any other binary asks again.
std::string VersionOutput(const std::string& path) {
  UniqueFd binary(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  auto cache = shared::CacheDir();
  if (!binary.valid() || !cache) return RunCapture({path, "--version"}, kVersionTimeoutMs);
  std::string file = *cache + "/qemu-version";
  std::string key = fmt::format("{} {}\n", path, FileIdentity(binary.get()));
  std::string cached = ReadSmallFile(file);
  if (cached.starts_with(key)) return cached.substr(key.size());
  std::string output = RunCapture({path, "--version"}, kVersionTimeoutMs);
  if (ParseQemuVersion(output)) ReplaceFile(file, key + output);
  return output;
}

}  // namespace

Expected<std::pair<int, int>> ParseQemuVersion(const std::string& output) {
  static const std::regex kVersion(R"(QEMU emulator version (\d+)\.(\d+))");
  std::smatch m;
  if (!std::regex_search(output, m, kVersion)) {
    return std::unexpected(Error{"qemu", "cannot read its version from --version", 0});
  }
  return std::pair{std::stoi(m[1]), std::stoi(m[2])};
}

Expected<Qemu> FindQemu() {
  const char* forced = std::getenv("SMOLBOX_QEMU");
  const char* search = std::getenv("PATH");
  std::string path = forced != nullptr && *forced != '\0'
                         ? forced
                         : FindOnPath(search != nullptr ? search : "/usr/local/bin:/usr/bin:/bin", kQemuName);
  if (path.empty() || access(path.c_str(), X_OK) != 0) {
    return std::unexpected(Error{"qemu", fmt::format("{} not found; install QEMU (Debian: apt-get install qemu-system-x86) or run scripts/setup",
                                                     path.empty() ? kQemuName : path), 0});
  }
  auto version = ParseQemuVersion(VersionOutput(path));
  if (!version) return std::unexpected(Error{"qemu", fmt::format("{}: {}", path, version.error().what), 0});
  if (version->first < kMinQemuMajor) {
    return std::unexpected(Error{"qemu", fmt::format("{} is version {}.{}; the vm backend needs {}.0 or newer",
                                                     path, version->first, version->second, kMinQemuMajor), 0});
  }
  return Qemu{path, version->first, version->second};
}

std::string KernelCommandLine(const VmConfig& c) {
  // quiet and loglevel: the console is a log on the host, and the workload must not be able
  // to fill it through kernel messages. panic=-1 with -no-reboot: a dead guest ends QEMU.
  std::string line = "console=ttyS0 quiet loglevel=1 panic=-1 reboot=t rdinit=/init "
                     "random.trust_cpu=on random.trust_bootloader=on 8250.nr_uarts=1";
  if (c.accel == Accel::kTcg) {
    if (c.tsc_khz > 0) line += fmt::format(" tsc_early_khz={}", c.tsc_khz);
    // Emulation executes no speculation, so the speculative-execution mitigations guard
    // nothing there; page-table isolation alone costs every syscall a TLB flush under TCG.
    line += " mitigations=off";
  }
  // The crypto self-tests take ~0.3 s of an emulated boot; the guest's only crypto is its RNG.
  line += " cryptomgr.notests";
  return line;
}

std::vector<std::string> QemuArgv(const Qemu& qemu, const VmConfig& c) {
  std::vector<std::string> argv = {
      qemu.path,
      "-M", "microvm",
      "-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
      "-sandbox", SMOLBOX_PROTECTED("qemu_sandbox") ? "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny" : "off",
      "-m", fmt::format("{}M", c.memory_mib),
      "-smp", std::to_string(c.vcpus),
  };
  if (c.accel == Accel::kKvm) {
    argv.insert(argv.end(), {"-accel", "kvm", "-cpu", "host"});
  } else {
    argv.insert(argv.end(), {"-accel", fmt::format("tcg,tb-size={}", kTcgCacheMiB), "-cpu", "max"});
  }
  argv.insert(argv.end(), {
      "-kernel", c.kernel,
      "-initrd", c.initramfs,
      "-append", KernelCommandLine(c),
      // The console: QEMU's stdout, which the runtime keeps as the VM's log.
      "-serial", "stdio",
      // Entropy from the host: without it the guest's first getrandom() waits.
      "-device", "virtio-rng-device",
      "-drive", fmt::format("id=rootfs,file={},format=raw,if=none,readonly=on", c.rootfs),
      "-device", "virtio-blk-device,drive=rootfs",
      "-chardev", fmt::format("socket,id=agent,fd={}", c.channel_fd),
      "-device", "virtio-serial-device",
      "-device", "virtserialport,chardev=agent,name=smolbox.agent",
      "-chardev", fmt::format("socket,id=egress,fd={}", c.egress_fd),
      "-device", fmt::format("virtserialport,chardev=egress,name={}", egress_link::kEgressPortName),
  });
  for (const auto& share : c.shares) {
    // The writable storage is mapped-xattr: what the guest makes that is not a regular file or a
    // directory (a FIFO, a socket, a symlink), and every mode and owner it sets, is a regular
    // file of QEMU's with user.virtfs.* xattrs on the host. So no special file, symlink or setuid
    // bit is ever made on the host, and a FIFO or socket works in the guest, whose kernel serves
    // it (under "none" QEMU made the real thing and then opened it: ENXIO). Read-only shares
    // show the host's files as they are.
    std::string fsdev = fmt::format("local,id={},path={},security_model={}", share.tag, share.path,
                                    share.read_only ? "none,readonly=on" : "mapped-xattr");
    argv.insert(argv.end(), {"-fsdev", fsdev, "-device",
                             fmt::format("virtio-9p-device,fsdev={},mount_tag={}", share.tag, share.tag)});
  }
  if (c.qmp_fd >= 0) {
    argv.insert(argv.end(), {"-chardev", fmt::format("socket,id=qmp,fd={}", c.qmp_fd), "-mon", "chardev=qmp,mode=control"});
    // The saved VM is stopped, and a restore would wake paused like it; without its run state in
    // the stream a restore starts running as soon as it has loaded.
    argv.insert(argv.end(), {"-global", "migration.store-global-state=off"});
  }
  // fd: rather than exec: (spawn=deny forbids it) or file: (QEMU 8.2 and later only).
  if (c.incoming_fd >= 0) argv.insert(argv.end(), {"-incoming", fmt::format("fd:{}", c.incoming_fd)});
  // No -netdev and no NIC: -nodefaults removed the default one, and none is added.
  if (!SMOLBOX_PROTECTED("no_nic")) {
    // A mutant's NIC reaches nothing: restrict=on, in QEMU's jail, whose network namespace is
    // empty. The guest carries no driver for it either (scripts/build-guest).
    argv.insert(argv.end(), {"-netdev", "user,id=mutant,restrict=on", "-device", "virtio-net-device,netdev=mutant"});
  }
  return argv;
}

int64_t HostTscKhz() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (!line.starts_with("cpu MHz")) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) break;
    double mhz = std::strtod(line.c_str() + colon + 1, nullptr);
    return static_cast<int64_t>(mhz * 1000);
  }
  return 0;
}

}  // namespace smolbox::vm
