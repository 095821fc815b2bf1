// The probe's sections, one file each, and the facts they hand to the verdict.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "smolbox/host.h"
#include "view.h"

namespace smolbox::host {

// What the verdict needs from the sections, besides their checks.
struct Findings {
  // CPU
  std::string cpu_virt_flag;  // "vmx", "svm" or empty
  bool cpu_hypervisor_flag = false;
  // KVM
  bool kvm_exists = false;
  bool kvm_is_device = false;  // the character device 10:232
  bool kvm_accessible = false;
  // The process that opens /dev/kvm for a VM may: as root that is QEMU, which the vm backend
  // confines as an unprivileged uid, so the mode must be o+rw (the udev rule's MODE="0666").
  bool kvm_open_to_qemu = false;
  std::optional<bool> kvm_api_ok;  // nullopt: not run (a fixture replays no ioctls)
  std::optional<bool> kvm_create_vm_ok;
  std::string kvm_module;  // "kvm_intel", "kvm_amd", "kvm_pvm" or empty
  std::string kvm_node;    // "0660 root:kvm", for hints
  // Namespaces
  bool ns_types_ok = false;
  bool userns_enabled = false;
  bool rootless_userns = false;  // live: really created one; fixture: the sysctls allow it
  bool apparmor_restricts_userns = false;
  // Kernel
  bool seccomp = false;
  std::optional<bool> tmpfs_user_xattr;  // nullopt: the kernel's version is unknown
  // The vm backend's needs
  bool qemu = false;
  bool qemu_microvm = false;
  bool guest_artifacts = false;
};

Section ProbeCpu(HostView& view, Findings& found);
Section ProbeKvm(HostView& view, Findings& found);
Section ProbeVirtualization(HostView& view, Findings& found);
Section ProbeDevices(HostView& view);
Section ProbeNamespaces(HostView& view, Findings& found);
Section ProbeCgroups(HostView& view);
Section ProbeKernel(HostView& view, Findings& found);
Section ProbeVmNeeds(const ProbeOptions& options, Findings& found);
Section ProbeEgressNeeds(HostView& view);

// Why the vm backend cannot use KVM here; empty when it can.
std::string WhyNoKvm(const HostView& view, const Findings& found);
// Fills backends, verdict, next steps and hardware_isolation_usable from the findings.
void Conclude(const HostView& view, const Findings& found, HostReport& report);

// Small helpers the sections share.
Check Pass(std::string name, std::string detail);
Check Warn(std::string name, std::string detail, std::string hint = "");
Check Fail(std::string name, std::string detail, std::string hint = "");
// The reason a live-only check gives under a fixture.
inline constexpr const char* kSkippedUnderRoot =
    "skipped: --root replays a fixture, and this check runs only live";
std::string Trim(std::string text);
std::vector<std::string> Words(const std::string& text);
bool HasWord(const std::string& text, const std::string& word);

}  // namespace smolbox::host
