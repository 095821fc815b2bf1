// Virtualization: nested support for our own guests, and whether we are a guest, of what.
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <fmt/format.h>

#include <cstring>

#include "probe.h"

namespace smolbox::host {
namespace {

bool LiveCpuidHypervisorBit() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  return (c >> 31) & 1;  // CPUID.1:ECX.hypervisor, set by every hypervisor for its guests
#else
  return false;
#endif
}

Check NestedCheck(HostView& view) {
  const char* name = "nested virtualization";
  for (const char* module : {"kvm_intel", "kvm_amd"}) {
    auto value = view.Read(fmt::format("/sys/module/{}/parameters/nested", module));
    if (!value) continue;
    std::string v = Trim(*value);
    if (v == "Y" || v == "1") {
      return Pass(name, fmt::format("{} nested={}: guests of this host can run KVM", module, v));
    }
    return Warn(name, fmt::format("{} nested={}: guests of this host get no KVM", module, v),
                fmt::format("modprobe -r {0} && modprobe {0} nested=1, if guests need it", module));
  }
  return Warn(name, "no kvm_intel or kvm_amd module, so no nested virtualization to offer");
}

std::string FromVendor(const std::string& vendor, const std::string& dmi_vendor) {
  if (vendor == "KVMKVMKVM") {
    if (dmi_vendor.empty()) return "KVM without DMI tables, as under Firecracker";
    if (dmi_vendor == "QEMU") return "QEMU with KVM";
    return fmt::format("KVM ({})", dmi_vendor);
  }
  if (vendor == "Microsoft Hv") return "Microsoft Hyper-V";
  if (vendor == "VMwareVMware") return "VMware";
  if (vendor == "XenVMMXenVMM") return "Xen";
  if (vendor == "TCGTCGTCGTCG") return "QEMU (TCG)";
  return "";
}

std::string FromDmi(const std::string& dmi_vendor, const std::string& product) {
  if (dmi_vendor == "QEMU") return "QEMU";
  if (dmi_vendor == "Microsoft Corporation" && product == "Virtual Machine")
    return "Microsoft Hyper-V";
  if (dmi_vendor.starts_with("VMware")) return "VMware";
  if (dmi_vendor == "Xen") return "Xen";
  return "";
}

// Names the hypervisor: its CPUID vendor leaf first, DMI when the leaf says nothing we know.
std::string NameHypervisor(const std::string& vendor, const std::string& dmi_vendor,
                           const std::string& product) {
  std::string name = FromVendor(vendor, dmi_vendor);
  if (name.empty()) name = FromDmi(dmi_vendor, product);
  if (name.empty() && !vendor.empty()) name = fmt::format("an unknown hypervisor (\"{}\")", vendor);
  if (name.empty()) name = "an unknown hypervisor";
  return name;
}

}  // namespace

std::string LiveCpuidHypervisor() {
#if defined(__x86_64__) || defined(__i386__)
  if (!LiveCpuidHypervisorBit()) return "";
  unsigned a = 0, regs[3] = {0, 0, 0};
  __cpuid(0x40000000, a, regs[0], regs[1], regs[2]);  // vendor in EBX, ECX, EDX
  char vendor[13] = {};
  std::memcpy(vendor, regs, 12);
  return Trim(vendor);
#else
  return "";
#endif
}

Section ProbeVirtualization(HostView& view, Findings& found) {
  Section section{"Virtualization", {}};
  section.checks.push_back(NestedCheck(view));
  std::string dmi_vendor = Trim(view.Read("/sys/class/dmi/id/sys_vendor").value_or(""));
  std::string product = Trim(view.Read("/sys/class/dmi/id/product_name").value_or(""));
  std::string dmi = dmi_vendor.empty() ? "no DMI" : fmt::format("DMI: {} {}", dmi_vendor, product);
  // Live, CPUID says it; a fixture replays the cpuinfo flag that mirrors the same bit.
  bool guest = view.live() ? LiveCpuidHypervisorBit() : found.cpu_hypervisor_flag;
  const char* name = "hypervisor above this machine";
  if (!guest) {
    section.checks.push_back(Pass(name, fmt::format("none: bare metal ({})", dmi)));
    return section;
  }
  std::string hypervisor = NameHypervisor(view.cpuid_hypervisor(), dmi_vendor, product);
  std::string cpuid =
      view.cpuid_hypervisor().empty() ? "" : fmt::format("CPUID \"{}\", ", view.cpuid_hypervisor());
  std::string detail = fmt::format("a guest of {} ({}{})", hypervisor, cpuid, dmi);
  if (!found.cpu_virt_flag.empty()) {
    section.checks.push_back(Pass(name, detail + ", with nested virtualization exposed"));
  } else {
    section.checks.push_back(Warn(name, detail + ", with no virtualization exposed to it",
                                  "only the owner of this VM can enable nested virtualization"));
  }
  return section;
}

}  // namespace smolbox::host
