// CPU: the hardware virtualization flags that KVM needs, from /proc/cpuinfo.
#include <sstream>

#include "probe.h"

namespace smolbox::host {
namespace {

// The first processor's "flags" line: every core of one machine reports the same features.
std::optional<std::string> CpuFlags(HostView& view) {
  auto cpuinfo = view.Read("/proc/cpuinfo");
  if (!cpuinfo) return std::nullopt;
  std::istringstream in(*cpuinfo);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("flags") && line.find(':') != std::string::npos) {
      return line.substr(line.find(':') + 1);
    }
  }
  return std::nullopt;
}

}  // namespace

Section ProbeCpu(HostView& view, Findings& found) {
  Section section{"CPU", {}};
  const char* name = "hardware virtualization flags";
  auto flags = CpuFlags(view);
  if (!flags) {
    section.checks.push_back(Warn(name, "cannot read the flags in /proc/cpuinfo"));
    return section;
  }
  found.cpu_hypervisor_flag = HasWord(*flags, "hypervisor");
  if (HasWord(*flags, "vmx")) found.cpu_virt_flag = "vmx";
  if (HasWord(*flags, "svm")) found.cpu_virt_flag = "svm";
  if (found.cpu_virt_flag == "vmx") {
    section.checks.push_back(Pass(name, "vmx (Intel VT-x)"));
  } else if (found.cpu_virt_flag == "svm") {
    section.checks.push_back(Pass(name, "svm (AMD-V)"));
  } else {
    std::string hint = found.cpu_hypervisor_flag
                           ? "this is a virtual machine whose hypervisor exposes no nested "
                             "virtualization"
                           : "enable VT-x or AMD-V in the firmware settings";
    section.checks.push_back(Fail(name, "no vmx or svm flag in /proc/cpuinfo", hint));
  }
  return section;
}

}  // namespace smolbox::host
