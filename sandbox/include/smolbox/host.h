// The host capability probe: what this machine can isolate with, KVM first.
//
// Each concern (CPU, KVM, virtualization, devices, namespaces, cgroups, kernel features, the vm
// backend's needs) is a section of checks; the report ends with the backends that can run here
// and what to do next. With a root, every /proc, /sys and /dev fact is read from a fixture
// instead (see conformance/tests/fixtures/host/README.md) and the live-only checks are skipped.
//
//   auto report = smolbox::host::ProbeHost({.root = "", .path = getenv("PATH")});
//   if (!report) return Die(report.error());
//   fmt::print("{}", smolbox::host::Render(*report, /*color=*/false));
//   return smolbox::host::ExitCode(*report);  // 0: hardware isolation usable, 1: not
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "smolbox/error.h"

namespace smolbox::host {

enum class Level { kPass, kWarn, kFail };

// "PASS", "WARN" or "FAIL".
const char* ToString(Level level);

struct Check {
  std::string name;
  Level level = Level::kFail;
  std::string detail;  // what was found
  std::string hint;    // what to do about it; empty on PASS
};

struct Section {
  std::string name;  // "CPU", "KVM", ...
  std::vector<Check> checks;
};

struct BackendVerdict {
  std::string name;       // "vm (kvm)", "vm (tcg)", "vm rootless", "ns", "ns rootless"
  std::string isolation;  // what separates a workload from the host
  bool host_ready = false;
  bool in_this_build = false;
  std::string reason;  // why it can or cannot run here
  std::string sandbox;  // the backend as "smolbox:<backend>", e.g. "smolbox:vm-tcg" for vm (tcg)
  bool usable() const { return host_ready && in_this_build; }
};

struct HostReport {
  std::string root;  // the fixture replayed; empty when live
  std::vector<Section> sections;
  std::vector<BackendVerdict> backends;
  bool hardware_isolation_usable = false;
  std::string verdict;
  // What this host still needs for a backend: what to install, build or allow. How to put the
  // host to use (a verifier's battery, say) is for the caller to add.
  std::vector<std::string> next_steps;
};

struct ProbeOptions {
  // A fixture directory to replay; empty probes this machine.
  std::string root;
  // Where to look for QEMU, like $PATH: QEMU is a fact of the installation, never of a fixture.
  std::string path;
  // Where the vm backend's guest artifacts live ($XDG_CACHE_HOME/smolbox/guest).
  std::string guest_dir;
};

// A path the probe consulted, and how: the capture script copies exactly these.
struct ProbedPath {
  enum class Kind { kFile, kExists, kStat };
  Kind kind;
  std::string path;
};

// Fails only when the probe itself cannot run, e.g. a root that is not a fixture.
Expected<HostReport> ProbeHost(const ProbeOptions& options);
// As ProbeHost, and also every path it read, in order, without repeats.
Expected<HostReport> ProbeHost(const ProbeOptions& options, std::vector<ProbedPath>& probed);
// "file", "exists" or "stat".
const char* ToString(ProbedPath::Kind kind);

// Why the vm backend cannot use KVM on this machine now; empty when it can. The runtime decides
// by this before each run, and it is the rule the report's verdict gives for "vm (kvm)": the
// same probe of the CPU and KVM sections, judged the same way.
std::string KvmUnusableReason();

// The CPUID hypervisor vendor (leaf 0x40000000), e.g. "KVMKVMKVM"; empty on bare metal.
std::string LiveCpuidHypervisor();

nlohmann::json ToJson(const HostReport& report);
// One `SECTION: check: LEVEL (detail; hint)` line per check, then backends, verdict, next steps.
std::string Render(const HostReport& report, bool color);
// 0: hardware isolation is usable; 1: it is not.
int ExitCode(const HostReport& report);

}  // namespace smolbox::host
