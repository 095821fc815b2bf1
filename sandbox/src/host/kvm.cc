// KVM: /dev/kvm is the right device, this user may open it, and the kernel behind it answers.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "probe.h"
#include "unique_fd.h"

namespace smolbox::host {
namespace {

constexpr const char* kKvm = "/dev/kvm";
constexpr unsigned kKvmMajor = 10, kKvmMinor = 232;  // misc device, fixed in devices.txt

std::string UdevHint() {
  return "add the udev rule KERNEL==\"kvm\", GROUP=\"kvm\", MODE=\"0666\", "
         "OPTIONS+=\"static_node=kvm\" (then udevadm control --reload-rules && udevadm trigger "
         "--name-match=kvm), or sudo usermod -aG kvm $USER and log in again";
}

Check NodeCheck(const std::optional<Node>& node, const Findings& found) {
  const char* name = "/dev/kvm exists";
  if (!node) {
    std::string hint = found.cpu_virt_flag.empty() ? "this host exposes no hardware virtualization"
                                                   : "load the kvm_intel or kvm_amd module";
    return Fail(name, "no /dev/kvm", hint);
  }
  if (node->type != "char" || node->major != kKvmMajor || node->minor != kKvmMinor) {
    return Fail(name, fmt::format("/dev/kvm is a {} {}:{}, not the character device 10:232",
                                  node->type, node->major, node->minor));
  }
  return Pass(name, "character device 10:232");
}

Check AccessCheck(HostView& view, const std::optional<Node>& node, Findings& found) {
  const char* name = "/dev/kvm is accessible";
  if (!node) return Fail(name, "no /dev/kvm");
  found.kvm_node = Describe(*node);
  found.kvm_accessible = view.Access(kKvm, R_OK | W_OK);
  bool open_to_all = (node->mode & (S_IROTH | S_IWOTH)) == (S_IROTH | S_IWOTH);
  found.kvm_open_to_qemu = found.kvm_accessible && (view.uid() != 0 || open_to_all);
  if (found.kvm_accessible) {
    return Pass(name, fmt::format("read/write for uid {} ({})", view.uid(), found.kvm_node));
  }
  return Fail(name,
              fmt::format("{}: uid {} may not open it read/write", found.kvm_node, view.uid()),
              UdevHint());
}

// The key capabilities QEMU's microvm needs from KVM, and the vCPU counts.
Check CapabilitiesCheck(int kvm) {
  const char* name = "key capabilities";
  std::vector<std::string> missing;
  for (auto [cap, label] :
       {std::pair{KVM_CAP_USER_MEMORY, "user memory"}, std::pair{KVM_CAP_IRQCHIP, "irqchip"},
        std::pair{KVM_CAP_IOEVENTFD, "ioeventfd"}, std::pair{KVM_CAP_IRQFD, "irqfd"}}) {
    if (ioctl(kvm, KVM_CHECK_EXTENSION, cap) <= 0) missing.push_back(label);
  }
  int recommended = ioctl(kvm, KVM_CHECK_EXTENSION, KVM_CAP_NR_VCPUS);
  int most = ioctl(kvm, KVM_CHECK_EXTENSION, KVM_CAP_MAX_VCPUS);
  std::string vcpus = fmt::format("{} vCPUs recommended, {} at most", recommended, most);
  if (!missing.empty()) {
    return Fail(name, fmt::format("missing {}; {}", fmt::join(missing, ", "), vcpus),
                "QEMU's microvm needs every one of them");
  }
  return Pass(name, "user memory, irqchip, ioeventfd, irqfd; " + vcpus);
}

// KVM_GET_API_VERSION, KVM_CREATE_VM and KVM_CHECK_EXTENSION, on this machine's /dev/kvm.
void LiveIoctls(Section& section, Findings& found) {
  UniqueFd kvm(open(kKvm, O_RDWR | O_CLOEXEC));
  if (!kvm.valid()) {
    std::string why = fmt::format("cannot open /dev/kvm: {}", std::strerror(errno));
    for (const char* name :
         {"KVM_GET_API_VERSION is 12", "KVM_CREATE_VM succeeds", "key capabilities"}) {
      section.checks.push_back(Fail(name, why));
    }
    found.kvm_api_ok = found.kvm_create_vm_ok = false;
    return;
  }
  int api = ioctl(kvm.get(), KVM_GET_API_VERSION, 0);
  found.kvm_api_ok = api == KVM_API_VERSION;
  section.checks.push_back(
      *found.kvm_api_ok ? Pass("KVM_GET_API_VERSION is 12", "12")
                        : Fail("KVM_GET_API_VERSION is 12", fmt::format("API version {}", api)));
  UniqueFd vm(ioctl(kvm.get(), KVM_CREATE_VM, 0));
  // KVM_CREATE_VM can fail with EINTR while the kernel sets up the VM's MMU; once more is enough.
  if (!vm.valid() && errno == EINTR) vm.Reset(ioctl(kvm.get(), KVM_CREATE_VM, 0));
  found.kvm_create_vm_ok = vm.valid();
  section.checks.push_back(
      vm.valid()
          ? Pass("KVM_CREATE_VM succeeds", "created and closed a VM")
          : Fail("KVM_CREATE_VM succeeds", fmt::format("KVM_CREATE_VM: {}", std::strerror(errno))));
  section.checks.push_back(CapabilitiesCheck(kvm.get()));
}

// Which module provides /dev/kvm. kvm_pvm (PVM) runs KVM on paging alone, without VT-x or
// AMD-V: a guest kernel must be built for it. Measured on a PVM host with QEMU 7.2, a stock
// Debian kernel booted ten times slower than TCG and then stopped with "KVM internal error".
Check ModuleCheck(HostView& view, Findings& found) {
  const char* name = "kernel module";
  for (const char* module : {"kvm_intel", "kvm_amd", "kvm_pvm"}) {
    if (view.Exists(fmt::format("/sys/module/{}", module))) {
      found.kvm_module = module;
      break;
    }
  }
  if (found.kvm_module == "kvm_pvm") {
    return Fail(name, "kvm_pvm: KVM without VT-x or AMD-V (PVM)",
                "PVM runs only guest kernels built for it: a stock kernel crawls through its boot "
                "and stops with a KVM internal error, so the vm backend cannot use this /dev/kvm");
  }
  if (!found.kvm_module.empty()) return Pass(name, found.kvm_module);
  if (found.kvm_exists) return Warn(name, "no kvm_intel, kvm_amd or kvm_pvm in /sys/module");
  return Fail(name, "no kvm_intel, kvm_amd or kvm_pvm in /sys/module");
}

}  // namespace

Section ProbeKvm(HostView& view, Findings& found) {
  Section section{"KVM", {}};
  std::optional<Node> node = view.Stat(kKvm);
  found.kvm_exists = node.has_value();
  section.checks.push_back(NodeCheck(node, found));
  found.kvm_is_device = section.checks.back().level == Level::kPass;
  section.checks.push_back(AccessCheck(view, node, found));
  if (view.live()) {
    LiveIoctls(section, found);
  } else {
    for (const char* name :
         {"KVM_GET_API_VERSION is 12", "KVM_CREATE_VM succeeds", "key capabilities"}) {
      section.checks.push_back(Warn(name, kSkippedUnderRoot));
    }
  }
  section.checks.push_back(ModuleCheck(view, found));
  return section;
}

}  // namespace smolbox::host
