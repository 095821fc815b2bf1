// The verdict: which smolbox backends run here, with which isolation, and what to do next.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "probe.h"

namespace smolbox::host {

// The one rule for whether the vm backend may use KVM: the report judges the host by it, and the
// runtime decides by it before each run (KvmUnusableReason, from a live probe of the same facts).
// Under a fixture the ioctls were not run, so the device, its access and the CPU flags decide.
std::string WhyNoKvm(const HostView& view, const Findings& f) {
  if (!f.kvm_exists) return "no /dev/kvm";
  if (!f.kvm_is_device) return "/dev/kvm is not the KVM character device";
  if (f.kvm_module == "kvm_pvm") {
    return "/dev/kvm comes from kvm_pvm, which runs only guest kernels built for PVM";
  }
  if (f.kvm_module.empty()) return "/dev/kvm is not backed by VT-x or AMD-V (no kvm_intel or kvm_amd module)";
  if (f.cpu_virt_flag.empty()) return "the CPU shows no vmx or svm flag";
  if (!f.kvm_accessible) {
    return fmt::format("/dev/kvm ({}) is not open to uid {}", f.kvm_node, view.uid());
  }
  // As root the vm backend confines QEMU as an unprivileged uid, which opens /dev/kvm itself.
  if (!f.kvm_open_to_qemu) {
    return fmt::format("/dev/kvm ({}) is not open to other users, and QEMU runs confined as an unprivileged uid",
                       f.kvm_node);
  }
  if (f.kvm_api_ok == false) return "KVM_GET_API_VERSION is not 12";
  if (f.kvm_create_vm_ok == false) return "KVM_CREATE_VM fails";
  return "";
}

namespace {

// What the vm backend would still miss on this host besides KVM, run by root or not.
std::vector<std::string> VmMissing(const Findings& f, bool rootless) {
  std::vector<std::string> missing;
  // Without root QEMU's jail is a user namespace of this user's, and the storage a tmpfs that
  // keeps owners and modes in user xattrs.
  if (rootless && !f.rootless_userns) missing.push_back("an unprivileged user namespace");
  if (rootless && f.tmpfs_user_xattr == false) missing.push_back("user xattrs on tmpfs (Linux 6.6)");
  if (!f.qemu) {
    missing.push_back("QEMU");
  } else if (!f.qemu_microvm) {
    missing.push_back("QEMU's microvm machine");
  }
  if (!f.guest_artifacts) missing.push_back("the guest artifacts");
  return missing;
}

BackendVerdict VmBackend(const HostView& view, const std::string& why_no_kvm, const Findings& f, bool kvm) {
  std::vector<std::string> missing = VmMissing(f, view.uid() != 0);
  std::string needs =
      missing.empty() ? "" : fmt::format("; it also needs {}", fmt::join(missing, ", "));
  if (kvm) {
    std::string state =
        why_no_kvm.empty() ? "KVM is usable here" : "KVM is not usable here: " + why_no_kvm;
    return {"vm (kvm)", "hardware virtualization: a guest kernel of its own",
            why_no_kvm.empty() && missing.empty(), true, fmt::format("{}{}", state, needs), "smolbox:vm"};
  }
  return {"vm (tcg)", "software emulation: a guest kernel of its own, slow", missing.empty(), true,
          missing.empty() ? "runs here with --accel tcg" : fmt::format("runs with --accel tcg{}", needs),
          "smolbox:vm-tcg"};
}

// The vm backend as an unprivileged user runs it, whoever runs the report: with KVM where the
// device is open to other users (as it is to QEMU, confined, under root), emulated otherwise.
BackendVerdict VmRootlessBackend(const std::string& why_no_kvm, const Findings& f) {
  std::vector<std::string> missing = VmMissing(f, true);
  bool kvm = why_no_kvm.empty();
  std::string reason = missing.empty()
                           ? (kvm ? "runs here without root, with KVM"
                                  : "runs here without root, with --accel tcg")
                           : fmt::format("this host lacks {}", fmt::join(missing, ", "));
  return {"vm rootless", "a guest kernel of its own, run by an unprivileged user", missing.empty(),
          true, reason, kvm ? "smolbox:vm" : "smolbox:vm-tcg"};
}

std::vector<std::string> NsMissing(const Findings& f) {
  std::vector<std::string> missing;
  if (!f.ns_types_ok) missing.push_back("a namespace type");
  if (!f.seccomp) missing.push_back("seccomp filters");
  if (!f.userns_enabled) missing.push_back("user namespaces");
  return missing;
}

BackendVerdict NsBackend(const HostView& view, const Findings& f, bool rootless) {
  std::vector<std::string> missing = NsMissing(f);
  bool as_root = !rootless && view.uid() == 0;
  if ((rootless || !as_root) && !f.rootless_userns)
    missing.push_back("an unprivileged user namespace");
  std::string isolation =
      rootless ? "namespaces, seccomp, cgroups and Landlock, run by an unprivileged user"
               : "namespaces, seccomp, cgroups and Landlock: shares the host kernel";
  std::string reason = missing.empty()
                           ? (as_root ? "runs here, as root" : "runs here, without root")
                           : fmt::format("this host lacks {}", fmt::join(missing, ", "));
  return {rootless ? "ns rootless" : "ns", isolation, missing.empty(), true, reason, "smolbox:ns"};
}

// What this host still needs; how to put it to use is the caller's to add (host.h).
std::vector<std::string> NextSteps(const std::string& why_no_kvm, const Findings& f,
                                   const HostReport& r) {
  std::vector<std::string> steps;
  bool ns =
      std::any_of(r.backends.begin(), r.backends.end(), [](const auto& b) { return b.usable(); });
  if (!ns && f.apparmor_restricts_userns) {
    steps.push_back(
        "Let unprivileged users have user namespaces with capabilities: sudo sysctl -w "
        "kernel.apparmor_restrict_unprivileged_userns=0 (or run smolbox as root)");
  }
  if (!f.qemu) steps.push_back("Install QEMU for the vm backend: apt-get install qemu-system-x86");
  if (!f.guest_artifacts) steps.push_back("Build the vm backend's guest: scripts/build-guest");
  if (why_no_kvm.empty()) return steps;
  if (f.kvm_is_device && !f.kvm_open_to_qemu && !f.cpu_virt_flag.empty()) {
    steps.push_back(
        "Open /dev/kvm to this user: the udev rule KERNEL==\"kvm\", GROUP=\"kvm\", "
        "MODE=\"0666\", OPTIONS+=\"static_node=kvm\" (then udevadm control "
        "--reload-rules && udevadm trigger --name-match=kvm), or sudo usermod -aG kvm "
        "$USER and log in again");
  }
  return steps;
}

}  // namespace

void Conclude(const HostView& view, const Findings& found, HostReport& report) {
  std::string why_no_kvm = WhyNoKvm(view, found);
  report.hardware_isolation_usable = why_no_kvm.empty();
  report.backends = {VmBackend(view, why_no_kvm, found, true), VmBackend(view, why_no_kvm, found, false),
                     VmRootlessBackend(why_no_kvm, found), NsBackend(view, found, false),
                     NsBackend(view, found, true)};

  std::vector<std::string> usable;
  for (const auto& b : report.backends) {
    if (b.usable()) usable.push_back(b.name);
  }
  std::string runs = usable.empty()
                         ? "no smolbox backend runs here"
                         : fmt::format("smolbox runs here with: {}", fmt::join(usable, ", "));
  // A fixture replays no ioctls: it can say only that nothing stands in KVM's way.
  std::string kvm =
      view.live() ? "KVM works" : "KVM's device, its access and the CPU flags are right";
  report.verdict =
      why_no_kvm.empty()
          ? fmt::format("Hardware isolation is usable here: {}; {}.", kvm, runs)
          : fmt::format("Hardware isolation is not usable here: {}; {}.", why_no_kvm, runs);
  report.next_steps = NextSteps(why_no_kvm, found, report);
}

}  // namespace smolbox::host
