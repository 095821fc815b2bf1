// The vm backend's needs: a QEMU that has the microvm machine, and the guest artifacts.
// QEMU is looked up on PATH even when replaying a fixture: it is a fact of the installation,
// not of /proc, /sys or /dev.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include "probe.h"
#include "program.h"

namespace smolbox::host {
namespace {

constexpr const char* kQemu = "qemu-system-x86_64";
// The names scripts/build-guest gives its outputs.
constexpr const char* kArtifacts[] = {"vmlinux", "initramfs.cpio", "rootfs.erofs"};

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
