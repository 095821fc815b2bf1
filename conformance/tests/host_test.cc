// smolvm-check host: exact verdicts for every host fixture, the live probe on this machine,
// --json, colour, a bad --root, and a capture that replays like the live probe.
#include "smolbox/host.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cli/host_command.h"
#include "test_support.h"

namespace smolvm_check {
namespace {

namespace fs = std::filesystem;
using smolbox::host::HostReport;
using smolbox::host::Level;
using smolbox::testing::ReadFileOrEmpty;
using smolbox::testing::TempDir;

const std::string kFixtures =
    std::string(SMOLVM_CHECK_SOURCE_DIR) + "/conformance/tests/fixtures/host";
const std::string kBinary = std::string(SMOLBOX_BIN_DIR) + "/smolvm-check";

// No QEMU and no guest artifacts, whatever this machine has: verdicts must not depend on it.
HostReport Probe(const std::string& root, const std::string& path = "",
                 const std::string& guest = "") {
  auto report = ProbeHost({root, path, guest});
  EXPECT_TRUE(report.has_value()) << report.error().ToString();
  return report.value_or(HostReport{});
}

HostReport Fixture(const std::string& name) { return Probe(kFixtures + "/" + name); }

// "Section: check" -> "PASS", in report order.
std::vector<std::pair<std::string, std::string>> Levels(const HostReport& report) {
  std::vector<std::pair<std::string, std::string>> levels;
  for (const auto& section : report.sections) {
    for (const auto& check : section.checks) {
      levels.emplace_back(section.name + ": " + check.name, ToString(check.level));
    }
  }
  return levels;
}

const smolbox::host::Check* Find(const HostReport& report, const std::string& key) {
  for (const auto& section : report.sections) {
    for (const auto& check : section.checks) {
      if (section.name + ": " + check.name == key) return &check;
    }
  }
  return nullptr;
}

std::vector<std::string> UsableBackends(const HostReport& report) {
  std::vector<std::string> names;
  for (const auto& b : report.backends) {
    if (b.usable()) names.push_back(b.name);
  }
  return names;
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const auto& line : lines) all += line + "\n";
  return all;
}

// Every check of every fixture, by column:
// github-runner, bare-metal-nested, kvm-inaccessible, this-machine, firecracker-no-kvm.
const std::vector<std::string> kColumns = {"github-runner", "bare-metal-nested", "kvm-inaccessible",
                                           "this-machine", "firecracker-no-kvm"};
const std::vector<std::vector<std::string>> kExpectedLevels = {
    {"CPU: hardware virtualization flags", "PASS", "PASS", "PASS", "FAIL", "FAIL"},
    {"KVM: /dev/kvm exists", "PASS", "PASS", "PASS", "PASS", "FAIL"},
    {"KVM: /dev/kvm is accessible", "PASS", "PASS", "FAIL", "PASS", "FAIL"},
    {"KVM: KVM_GET_API_VERSION is 12", "WARN", "WARN", "WARN", "WARN", "WARN"},
    {"KVM: KVM_CREATE_VM succeeds", "WARN", "WARN", "WARN", "WARN", "WARN"},
    {"KVM: key capabilities", "WARN", "WARN", "WARN", "WARN", "WARN"},
    {"KVM: kernel module", "PASS", "PASS", "PASS", "FAIL", "FAIL"},
    {"Virtualization: nested virtualization", "PASS", "PASS", "PASS", "WARN", "WARN"},
    {"Virtualization: hypervisor above this machine", "PASS", "PASS", "PASS", "WARN", "WARN"},
    {"Devices: /dev/vhost-vsock", "WARN", "PASS", "WARN", "WARN", "WARN"},
    {"Devices: /dev/vhost-net", "WARN", "PASS", "WARN", "WARN", "WARN"},
    {"Devices: /dev/net/tun", "PASS", "PASS", "PASS", "PASS", "PASS"},
    {"Namespaces: user namespaces", "PASS", "PASS", "PASS", "PASS", "PASS"},
    {"Namespaces: unprivileged_userns_clone (Debian)", "PASS", "PASS", "PASS", "PASS", "PASS"},
    {"Namespaces: AppArmor userns restriction (Ubuntu)", "WARN", "PASS", "PASS", "PASS", "PASS"},
    {"Namespaces: namespace types", "PASS", "PASS", "PASS", "PASS", "PASS"},
    {"Namespaces: unprivileged user namespace", "WARN", "WARN", "WARN", "WARN", "WARN"},
    {"cgroups: hierarchy", "PASS", "PASS", "PASS", "PASS", "PASS"},
    {"cgroups: v2 controllers", "PASS", "PASS", "PASS", "PASS", "PASS"},
    {"cgroups: memory, cpu and pids limits", "WARN", "PASS", "WARN", "PASS", "PASS"},
    {"Kernel: seccomp filters", "PASS", "PASS", "PASS", "PASS", "PASS"},
    {"Kernel: Landlock", "PASS", "PASS", "PASS", "WARN", "WARN"},
    {"Kernel: user xattrs on tmpfs", "PASS", "PASS", "WARN", "PASS", "WARN"},
    {"VM backend: QEMU", "WARN", "WARN", "WARN", "WARN", "WARN"},
    {"VM backend: microvm machine", "WARN", "WARN", "WARN", "WARN", "WARN"},
    {"VM backend: guest artifacts", "WARN", "WARN", "WARN", "WARN", "WARN"},
    {"Egress: nftables in a user namespace", "WARN", "WARN", "WARN", "WARN", "WARN"},
    {"Egress: veth", "WARN", "WARN", "WARN", "WARN", "WARN"},
    {"Egress: tun", "WARN", "WARN", "WARN", "WARN", "WARN"},
};

class EveryFixture : public testing::TestWithParam<size_t> {};

TEST_P(EveryFixture, gives_each_check_its_exact_level) {
  size_t column = GetParam();
  std::vector<std::pair<std::string, std::string>> expected;
  for (const auto& row : kExpectedLevels) expected.emplace_back(row[0], row[column + 1]);
  EXPECT_EQ(Levels(Fixture(kColumns[column])), expected);
}

INSTANTIATE_TEST_SUITE_P(HostFixtures, EveryFixture, testing::Range(size_t{0}, kColumns.size()),
                         [](const testing::TestParamInfo<size_t>& param) {
                           std::string name = kColumns[param.param];
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(HostFixture, github_runner_has_usable_kvm_under_hyperv_but_no_rootless_namespaces) {
  HostReport r = Fixture("github-runner");
  EXPECT_TRUE(r.hardware_isolation_usable);
  EXPECT_EQ(smolbox::host::ExitCode(r), 0);
  EXPECT_EQ(UsableBackends(r), std::vector<std::string>{});
  EXPECT_EQ(
      Find(r, "Virtualization: hypervisor above this machine")->detail,
      "a guest of Microsoft Hyper-V (CPUID \"Microsoft Hv\", DMI: Microsoft Corporation Virtual "
      "Machine), with nested virtualization exposed");
  EXPECT_EQ(Find(r, "KVM: /dev/kvm is accessible")->detail,
            "read/write for uid 1001 (0666 root:kvm)");
  EXPECT_EQ(Find(r, "cgroups: hierarchy")->detail, "v2 at /sys/fs/cgroup");
  EXPECT_EQ(
      r.verdict,
      "Hardware isolation is usable here: KVM's device, its access and the CPU flags are right; "
      "no smolbox backend runs here.");
  std::string steps = Joined(r.next_steps);
  EXPECT_NE(steps.find("kernel.apparmor_restrict_unprivileged_userns=0"), std::string::npos)
      << steps;
  EXPECT_EQ(steps.find("remote github"), std::string::npos) << steps;
}

TEST(HostFixture, bare_metal_with_nested_kvm_is_usable_and_runs_ns_rootless) {
  HostReport r = Fixture("bare-metal-nested");
  EXPECT_TRUE(r.hardware_isolation_usable);
  EXPECT_EQ(smolbox::host::ExitCode(r), 0);
  EXPECT_EQ(UsableBackends(r), (std::vector<std::string>{"ns", "ns rootless"}));
  EXPECT_EQ(Find(r, "Virtualization: hypervisor above this machine")->detail,
            "none: bare metal (DMI: Dell Inc. PowerEdge R650)");
  EXPECT_EQ(Find(r, "Virtualization: nested virtualization")->detail,
            "kvm_intel nested=Y: guests of this host can run KVM");
  EXPECT_EQ(Find(r, "cgroups: memory, cpu and pids limits")->detail,
            "writable for uid 1000: memory v2, cpu v2, pids v2");
  EXPECT_EQ(Joined(r.next_steps).find("remote github"), std::string::npos);
}

TEST(HostFixture, inaccessible_kvm_names_the_udev_rule_and_the_fallback) {
  HostReport r = Fixture("kvm-inaccessible");
  EXPECT_FALSE(r.hardware_isolation_usable);
  EXPECT_EQ(smolbox::host::ExitCode(r), 1);
  EXPECT_EQ(UsableBackends(r), (std::vector<std::string>{"ns", "ns rootless"}));
  EXPECT_EQ(Find(r, "KVM: /dev/kvm is accessible")->detail,
            "0660 root:kvm: uid 1000 may not open it read/write");
  EXPECT_EQ(
      r.verdict,
      "Hardware isolation is not usable here: /dev/kvm (0660 root:kvm) is not open to uid 1000; "
      "smolbox runs here with: ns, ns rootless.");
  std::string steps = Joined(r.next_steps);
  EXPECT_NE(steps.find(R"(KERNEL=="kvm", GROUP="kvm", MODE="0666", OPTIONS+="static_node=kvm")"),
            std::string::npos)
      << steps;
  EXPECT_NE(steps.find("sudo usermod -aG kvm $USER"), std::string::npos) << steps;
  EXPECT_NE(steps.find("smolvm-check remote github --repo OWNER/NAME"), std::string::npos) << steps;
}

TEST(HostFixture, this_machine_has_a_pvm_kvm_that_gives_no_hardware_isolation) {
  HostReport r = Fixture("this-machine");
  EXPECT_FALSE(r.hardware_isolation_usable);
  EXPECT_EQ(smolbox::host::ExitCode(r), 1);
  EXPECT_EQ(UsableBackends(r), (std::vector<std::string>{"ns", "ns rootless"}));
  EXPECT_EQ(
      Find(r, "Virtualization: hypervisor above this machine")->detail,
      "a guest of KVM without DMI tables, as under Firecracker (CPUID \"KVMKVMKVM\", no DMI), with "
      "no virtualization exposed to it");
  EXPECT_EQ(Find(r, "cgroups: hierarchy")->detail,
            "hybrid: v2 at /sys/fs/cgroup/unified, v1 for blkio cpu cpuacct cpuset devices freezer "
            "memory pids");
  EXPECT_NE(r.verdict.find("kvm_pvm"), std::string::npos) << r.verdict;
  EXPECT_NE(Joined(r.next_steps).find("smolvm-check remote github --repo OWNER/NAME"),
            std::string::npos);
}

TEST(HostFixture, a_cloud_vm_without_kvm_fails_kvm_and_names_the_fallback) {
  HostReport r = Fixture("firecracker-no-kvm");
  EXPECT_FALSE(r.hardware_isolation_usable);
  EXPECT_EQ(smolbox::host::ExitCode(r), 1);
  const auto* exists = Find(r, "KVM: /dev/kvm exists");
  EXPECT_EQ(exists->detail, "no /dev/kvm");
  EXPECT_EQ(exists->hint, "this host exposes no hardware virtualization");
  EXPECT_EQ(r.verdict,
            "Hardware isolation is not usable here: no /dev/kvm; smolbox runs here with: ns, ns "
            "rootless.");
  const std::string fallback =
      "Run the battery on a GitHub Actions runner with KVM: smolvm-check remote github --repo "
      "OWNER/NAME";
  EXPECT_NE(std::find(r.next_steps.begin(), r.next_steps.end(), fallback), r.next_steps.end());
}

TEST(HostFixture, skipped_live_checks_say_why) {
  HostReport r = Fixture("github-runner");
  for (const char* key : {"KVM: KVM_GET_API_VERSION is 12", "KVM: KVM_CREATE_VM succeeds",
                          "KVM: key capabilities", "Namespaces: unprivileged user namespace"}) {
    EXPECT_TRUE(Find(r, key)->detail.starts_with("skipped: --root replays a fixture")) << key;
  }
}

TEST(HostVmNeeds, a_qemu_with_microvm_and_built_artifacts_make_tcg_host_ready) {
  TempDir tmp("host-test");
  fs::path dir = tmp.path();
  fs::create_directories(dir / "bin");
  fs::create_directories(dir / "guest");
  std::ofstream(dir / "bin/qemu-system-x86_64")
      << "#!/bin/sh\ncase \"$1\" in --version) echo 'QEMU emulator version 9.9.9';;\n"
         "*) echo 'microvm              microvm (i386)';; esac\n";
  fs::permissions(dir / "bin/qemu-system-x86_64", fs::perms::owner_all);
  for (const char* artifact : {"vmlinux", "initramfs.cpio", "rootfs.erofs"})
    std::ofstream(dir / "guest" / artifact);
  HostReport r =
      Probe(kFixtures + "/bare-metal-nested", (dir / "bin").string(), (dir / "guest").string());
  EXPECT_EQ(Find(r, "VM backend: QEMU")->detail,
            "QEMU emulator version 9.9.9 (" + (dir / "bin/qemu-system-x86_64").string() + ")");
  EXPECT_EQ(Find(r, "VM backend: microvm machine")->level, Level::kPass);
  EXPECT_EQ(Find(r, "VM backend: guest artifacts")->level, Level::kPass);
  for (const auto& b : r.backends) {
    if (b.name.starts_with("vm")) {
      EXPECT_TRUE(b.in_this_build) << b.name;
      EXPECT_EQ(b.usable(), b.host_ready) << b.name;
    }
  }
  // The fixture's user (uid 1000) runs the vm backend without root: it needs an unprivileged
  // user namespace, which the fixture's sysctls allow.
  const auto& tcg = r.backends.at(1);
  EXPECT_EQ(tcg.name, "vm (tcg)");
  EXPECT_TRUE(tcg.host_ready) << tcg.reason;
  EXPECT_EQ(tcg.reason, "runs here with --accel tcg");
  const auto& rootless = r.backends.at(2);
  EXPECT_EQ(rootless.name, "vm rootless");
  EXPECT_TRUE(rootless.usable()) << rootless.reason;
  EXPECT_EQ(rootless.sandbox, "smolbox:vm");
  EXPECT_EQ(rootless.reason, "runs here without root, with KVM");
}

struct Outcome {
  int code = -1;
  std::string out, err;
};

// The real binary, its stdout a memory file (never a TTY), no QEMU on PATH.
Outcome RunBinary(std::vector<std::string> args, const std::string& env = "NO_COLOR=1") {
  args.insert(args.begin(), {kBinary, "host"});
  smolbox::testing::ProgramOptions options;
  options.extra_env = {env, "PATH=/nonexistent"};
  auto run = smolbox::testing::RunProgram(args, options);
  return {run.exit_code, run.out, run.err};
}

bool CpuHasVirtualization() {
  std::string cpuinfo = ReadFileOrEmpty("/proc/cpuinfo");
  return cpuinfo.find(" vmx") != std::string::npos || cpuinfo.find(" svm") != std::string::npos;
}

TEST(HostLive, this_machine_reports_no_hardware_isolation_and_names_the_fallback) {
  if (CpuHasVirtualization())
    GTEST_SKIP() << "this machine's CPU has vmx/svm: the no-KVM case does not apply";
  Outcome run = RunBinary({});
  EXPECT_EQ(run.code, 1) << run.out << run.err;
  EXPECT_NE(run.out.find("CPU: hardware virtualization flags: FAIL"), std::string::npos) << run.out;
  // Where /dev/kvm exists at all, it must not be mistaken for hardware isolation.
  bool kvm = fs::exists("/dev/kvm");
  std::string exists_line =
      kvm ? "KVM: /dev/kvm exists: PASS" : "KVM: /dev/kvm exists: FAIL (no /dev/kvm";
  EXPECT_NE(run.out.find(exists_line), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("Hardware isolation is not usable here"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("smolvm-check remote github --repo OWNER/NAME"), std::string::npos)
      << run.out;
}

TEST(HostLive, the_runtime_decides_kvm_by_the_reports_own_rule) {
  HostReport r = Probe("");
  std::string why = smolbox::host::KvmUnusableReason();
  EXPECT_EQ(r.hardware_isolation_usable, why.empty()) << why;
  if (!why.empty()) {
    EXPECT_NE(r.verdict.find(why), std::string::npos) << r.verdict << "\n" << why;
  }
}

// github-runner as root, before the udev rule: root may open /dev/kvm, but QEMU, which the vm
// backend confines as an unprivileged uid, may not.
TEST(HostFixture, kvm_closed_to_other_users_is_unusable_for_root_whose_qemu_runs_unprivileged) {
  char tmpl[] = "/tmp/host-fixture-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  fs::path dir = fs::path(tmpl) / "runner-as-root";
  fs::copy(kFixtures + "/github-runner", dir, fs::copy_options::recursive);
  auto stat = nlohmann::json::parse(ReadFileOrEmpty((dir / "stat.json").string()));
  stat["/dev/kvm"]["mode"] = "0660";
  std::ofstream((dir / "stat.json").string()) << stat.dump();
  std::ofstream((dir / "host.json").string()) << R"({"uid": 0, "groups": [0], "cpuid_hypervisor": "Microsoft Hv"})";
  HostReport r = Probe(dir.string());
  EXPECT_FALSE(r.hardware_isolation_usable);
  EXPECT_NE(r.verdict.find("/dev/kvm (0660 root:kvm) is not open to other users"), std::string::npos) << r.verdict;
  EXPECT_NE(Joined(r.next_steps).find("MODE=\"0666\""), std::string::npos) << Joined(r.next_steps);
  fs::remove_all(tmpl);
}

TEST(HostLive, live_checks_run_live) {
  HostReport r = Probe("");
  for (const auto& [key, level] : Levels(r)) {
    EXPECT_EQ(Find(r, key)->detail.find("skipped"), std::string::npos) << key;
  }
  EXPECT_TRUE(r.root.empty());
}

TEST(HostCommand, json_has_sections_backends_verdict_and_the_exit_code) {
  Outcome run = RunBinary({"--json", "--root", kFixtures + "/kvm-inaccessible"});
  EXPECT_EQ(run.code, 1) << run.err;
  auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j.at("root"), kFixtures + "/kvm-inaccessible");
  EXPECT_EQ(j.at("exit_code"), 1);
  EXPECT_EQ(j.at("hardware_isolation_usable"), false);
  EXPECT_TRUE(j.at("verdict").is_string());
  EXPECT_TRUE(j.at("next_steps").is_array());
  std::vector<std::string> sections;
  for (const auto& s : j.at("sections")) {
    sections.push_back(s.at("name"));
    for (const auto& c : s.at("checks")) {
      EXPECT_TRUE(std::set<std::string>({"PASS", "WARN", "FAIL"}).contains(c.at("level"))) << c;
      EXPECT_TRUE(c.at("name").is_string() && c.at("detail").is_string() &&
                  c.at("hint").is_string());
    }
  }
  EXPECT_EQ(sections, (std::vector<std::string>{"CPU", "KVM", "Virtualization", "Devices",
                                                "Namespaces", "cgroups", "Kernel", "VM backend",
                                                "Egress"}));
  std::vector<std::string> backends;
  std::vector<std::string> sandboxes;
  for (const auto& b : j.at("backends")) {
    backends.push_back(b.at("name"));
    sandboxes.push_back(b.at("sandbox"));
    EXPECT_EQ(b.at("usable"), b.at("host_ready").get<bool>() && b.at("in_this_build").get<bool>());
  }
  EXPECT_EQ(backends, (std::vector<std::string>{"vm (kvm)", "vm (tcg)", "vm rootless", "ns", "ns rootless"}));
  // What `smolvm-check run --sandbox` takes for each: scripts/kvm-battery runs exactly these.
  // Without KVM here, the rootless vm is the emulated one.
  EXPECT_EQ(sandboxes, (std::vector<std::string>{"smolbox:vm", "smolbox:vm-tcg", "smolbox:vm-tcg", "smolbox:ns",
                                                 "smolbox:ns"}));
}

TEST(HostCommand, exit_code_is_zero_where_kvm_is_usable) {
  EXPECT_EQ(RunBinary({"--root", kFixtures + "/github-runner"}).code, 0);
  EXPECT_EQ(RunBinary({"--root", kFixtures + "/this-machine"}).code, 1);
}

TEST(HostCommand, no_escape_codes_off_a_tty_or_with_no_color) {
  for (const char* env : {"NO_COLOR=1", "NO_COLOR="}) {
    Outcome run = RunBinary({"--root", kFixtures + "/kvm-inaccessible"}, env);
    EXPECT_EQ(run.out.find('\033'), std::string::npos) << env;
    EXPECT_NE(run.out.find("KVM: /dev/kvm is accessible: FAIL (0660 root:kvm"), std::string::npos)
        << run.out;
  }
  // Colour is the renderer's to give when asked: the command asks only on a TTY.
  std::string coloured = smolbox::host::Render(Fixture("kvm-inaccessible"), true);
  EXPECT_NE(coloured.find("\033[31mFAIL\033[0m"), std::string::npos);
}

TEST(HostCommand, a_bad_root_exits_2_with_a_clear_message) {
  Outcome missing = RunBinary({"--root", "/nonexistent/fixture"});
  EXPECT_EQ(missing.code, 2);
  EXPECT_EQ(missing.err, "smolvm-check host: --root /nonexistent/fixture: no such directory\n");
  EXPECT_EQ(missing.out, "");
  Outcome not_fixture = RunBinary({"--root", kFixtures});
  EXPECT_EQ(not_fixture.code, 2);
  EXPECT_EQ(not_fixture.err, "smolvm-check host: --root " + kFixtures +
                                 ": no proc/ below it, so it is not a host fixture\n");
  TempDir tmp("host-bad");
  fs::path dir = tmp.path();
  fs::create_directories(dir / "proc");
  Outcome no_host_json = RunBinary({"--root", dir.string()});
  EXPECT_EQ(no_host_json.code, 2);
  EXPECT_NE(no_host_json.err.find("host.json: missing"), std::string::npos) << no_host_json.err;
  std::ofstream(dir / "host.json") << "{\"uid\": ";
  std::ofstream(dir / "stat.json") << "{}";
  Outcome bad_json = RunBinary({"--root", dir.string()});
  EXPECT_EQ(bad_json.code, 2);
  EXPECT_NE(bad_json.err.find("host.json"), std::string::npos) << bad_json.err;
}

// The checks a fixture cannot replay: ioctls, a real unshare, Landlock's syscall, and what
// egress tries in a network namespace of its own.
const std::set<std::string> kLiveOnly = {
    "KVM: KVM_GET_API_VERSION is 12", "KVM: KVM_CREATE_VM succeeds", "KVM: key capabilities",
    "Namespaces: unprivileged user namespace", "Kernel: Landlock",
    "Egress: nftables in a user namespace", "Egress: veth"};

TEST(HostCapture, a_captured_fixture_replays_like_the_live_probe) {
  TempDir tmp("host-capture");
  fs::path dir = fs::path(tmp.path()) / "fixture";
  std::string cmd = "SMOLVM_CHECK=" + kBinary + " " + SMOLVM_CHECK_SOURCE_DIR +
                    "/scripts/capture-host-fixture " + dir.string() + " >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::vector<smolbox::host::ProbedPath> live_paths, replay_paths;
  auto live = smolbox::host::ProbeHost({"", "", ""}, live_paths);
  auto replay = smolbox::host::ProbeHost({dir.string(), "", ""}, replay_paths);
  ASSERT_TRUE(live && replay);
  for (const auto& [key, level] : Levels(*live)) {
    if (kLiveOnly.contains(key)) continue;
    const auto* replayed = Find(*replay, key);
    ASSERT_NE(replayed, nullptr) << key;
    EXPECT_EQ(ToString(replayed->level), level) << key;
    EXPECT_EQ(replayed->detail, Find(*live, key)->detail) << key;
  }
  EXPECT_EQ(replay->hardware_isolation_usable, live->hardware_isolation_usable);
  // The replay reads exactly the paths the live probe read: the capture missed none.
  ASSERT_EQ(replay_paths.size(), live_paths.size());
  for (size_t i = 0; i < live_paths.size(); ++i) {
    EXPECT_EQ(replay_paths[i].path, live_paths[i].path);
    EXPECT_EQ(replay_paths[i].kind, live_paths[i].kind) << live_paths[i].path;
  }
}

}  // namespace
}  // namespace smolvm_check
