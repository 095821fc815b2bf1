// QEMU: finding a binary that is new enough, and the command line of one microVM.
//
// The command line is a pure function of a VmConfig, so tests can check every flag that
// matters for isolation (no NIC, the seccomp sandbox, read-only shares) without a VM.
//
//   auto qemu = FindQemu();
//   std::vector<std::string> argv = QemuArgv(*qemu, config);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "smolbox/error.h"
#include "smolbox/spec.h"

namespace smolbox::vm {

struct Qemu {
  std::string path;
  int major = 0;
  int minor = 0;
};

// The oldest QEMU whose microvm machine has everything used here (virtio-mmio, ACPI, -sandbox).
inline constexpr int kMinQemuMajor = 6;

// $SMOLBOX_QEMU, else qemu-system-x86_64 on PATH; its version read from --version once per
// binary (kept in the cache dir under the binary's identity).
Expected<Qemu> FindQemu();
// "QEMU emulator version 7.2.22 (...)" -> {7, 2}; an error for anything else.
Expected<std::pair<int, int>> ParseQemuVersion(const std::string& output);

struct NinePShare {
  std::string tag;
  std::string path;  // as QEMU opens it, e.g. /proc/self/fd/N
  bool read_only = true;
};

struct VmConfig {
  Accel accel = Accel::kTcg;  // kKvm or kTcg, never kAuto
  int64_t memory_mib = 0;     // guest RAM
  int vcpus = 1;
  std::string kernel;      // paths as QEMU opens them
  std::string initramfs;
  std::string rootfs;
  int channel_fd = -1;     // a connected socket: the agent's virtio-serial port
  // A connected socket: the egress link's port (egress_link.h). Every VM has it, idle without
  // egress, so that one boot snapshot serves runs with egress and without.
  int egress_fd = -1;
  std::vector<NinePShare> shares;
  int64_t tsc_khz = 0;     // TCG: the guest skips TSC calibration, which can hang under emulation
  // Boot snapshots (snapshot.h). Neither changes the guest's devices, so a VM saved with a QMP
  // monitor restores into one without.
  int qmp_fd = -1;       // a connected socket: a QMP monitor, to stop and save the VM
  int incoming_fd = -1;  // a saved VM to load instead of booting, read from its current offset
};

std::vector<std::string> QemuArgv(const Qemu& qemu, const VmConfig& config);
std::string KernelCommandLine(const VmConfig& config);

// The host's TSC frequency in kHz, from /proc/cpuinfo; 0 when unknown.
int64_t HostTscKhz();

}  // namespace smolbox::vm
