// The QEMU command line: every flag isolation depends on, checked without booting a VM.
#include "vm/qemu_command.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "test_support.h"

namespace smolbox::vm {
namespace {

VmConfig TcgConfig() {
  VmConfig c;
  c.accel = Accel::kTcg;
  c.memory_mib = 704;
  c.vcpus = 2;
  c.kernel = "/proc/self/fd/3";
  c.initramfs = "/proc/self/fd/4";
  c.rootfs = "/proc/self/fd/5";
  c.channel_fd = 6;
  c.egress_fd = 11;
  c.tsc_khz = 2596136;
  c.shares = {{"storage", "/proc/self/fd/7", false}, {"ro0", "/proc/self/fd/8", true}};
  return c;
}

std::string Joined(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& a : argv) line += a + " ";
  return line;
}

// The value that follows `flag`, for every occurrence.
std::vector<std::string> Values(const std::vector<std::string>& argv, const std::string& flag) {
  std::vector<std::string> values;
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == flag) values.push_back(argv[i + 1]);
  }
  return values;
}

TEST(QemuArgv, is_a_microvm_without_defaults_or_any_network_device) {
  auto argv = QemuArgv(Qemu{"/usr/bin/qemu-system-x86_64", 7, 2}, TcgConfig());
  EXPECT_EQ(argv.front(), "/usr/bin/qemu-system-x86_64");
  EXPECT_EQ(Values(argv, "-M"), std::vector<std::string>{"microvm"});
  for (const char* flag : {"-nodefaults", "-no-user-config", "-nographic", "-no-reboot"}) {
    EXPECT_NE(std::find(argv.begin(), argv.end(), flag), argv.end()) << flag;
  }
  std::string line = Joined(argv);
  for (const char* nic : {"-netdev", "-nic", "-net ", "virtio-net", "e1000", "user,"}) {
    EXPECT_EQ(line.find(nic), std::string::npos) << nic << " in " << line;
  }
}

TEST(QemuArgv, confines_qemu_with_its_seccomp_sandbox) {
  auto argv = QemuArgv(Qemu{"qemu", 7, 2}, TcgConfig());
  EXPECT_EQ(Values(argv, "-sandbox"),
            std::vector<std::string>{"on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"});
}

TEST(QemuArgv, gives_entropy_a_read_only_rootfs_the_agent_port_and_the_egress_port) {
  auto argv = QemuArgv(Qemu{"qemu", 7, 2}, TcgConfig());
  auto devices = Values(argv, "-device");
  EXPECT_NE(std::find(devices.begin(), devices.end(), "virtio-rng-device"), devices.end());
  EXPECT_NE(std::find(devices.begin(), devices.end(), "virtserialport,chardev=agent,name=smolbox.agent"), devices.end());
  // Egress leaves the guest only as a stream on this port, never through a NIC.
  EXPECT_NE(std::find(devices.begin(), devices.end(), "virtserialport,chardev=egress,name=smolbox.egress"), devices.end());
  EXPECT_EQ(Values(argv, "-drive"),
            std::vector<std::string>{"id=rootfs,file=/proc/self/fd/5,format=raw,if=none,readonly=on"});
  EXPECT_EQ(Values(argv, "-chardev"), (std::vector<std::string>{"socket,id=agent,fd=6", "socket,id=egress,fd=11"}));
  EXPECT_EQ(Values(argv, "-m"), std::vector<std::string>{"704M"});
  EXPECT_EQ(Values(argv, "-smp"), std::vector<std::string>{"2"});
}

TEST(QemuArgv, shares_ro_volumes_read_only_and_only_the_storage_writable) {
  auto fsdevs = Values(QemuArgv(Qemu{"qemu", 7, 2}, TcgConfig()), "-fsdev");
  ASSERT_EQ(fsdevs.size(), 2u);
  EXPECT_EQ(fsdevs[0], "local,id=storage,path=/proc/self/fd/7,security_model=mapped-xattr");
  EXPECT_EQ(fsdevs[1], "local,id=ro0,path=/proc/self/fd/8,security_model=none,readonly=on");
}

TEST(QemuArgv, tcg_gets_cpu_max_and_the_tsc_frequency_kvm_gets_the_host_cpu) {
  VmConfig tcg = TcgConfig();
  auto argv = QemuArgv(Qemu{"qemu", 7, 2}, tcg);
  EXPECT_EQ(Values(argv, "-cpu"), std::vector<std::string>{"max"});
  EXPECT_NE(KernelCommandLine(tcg).find("tsc_early_khz=2596136"), std::string::npos);
  EXPECT_NE(KernelCommandLine(tcg).find("mitigations=off"), std::string::npos);
  VmConfig kvm = tcg;
  kvm.accel = Accel::kKvm;
  argv = QemuArgv(Qemu{"qemu", 7, 2}, kvm);
  EXPECT_EQ(Values(argv, "-accel"), std::vector<std::string>{"kvm"});
  EXPECT_EQ(Values(argv, "-cpu"), std::vector<std::string>{"host"});
  EXPECT_EQ(KernelCommandLine(kvm).find("tsc_early_khz"), std::string::npos);
  // A real CPU speculates: under KVM the guest keeps its mitigations.
  EXPECT_EQ(KernelCommandLine(kvm).find("mitigations=off"), std::string::npos);
}

TEST(QemuArgv, has_no_monitor_and_loads_no_snapshot_unless_asked) {
  auto argv = QemuArgv(Qemu{"/usr/bin/qemu-system-x86_64", 7, 2}, TcgConfig());
  EXPECT_TRUE(Values(argv, "-mon").empty());
  EXPECT_TRUE(Values(argv, "-incoming").empty());
  EXPECT_EQ(Values(argv, "-chardev"), (std::vector<std::string>{"socket,id=agent,fd=6", "socket,id=egress,fd=11"}));
}

TEST(QemuArgv, adds_a_qmp_monitor_on_its_socket_and_loads_a_snapshot_from_an_fd) {
  VmConfig c = TcgConfig();
  c.qmp_fd = 9;
  c.incoming_fd = 10;
  auto argv = QemuArgv(Qemu{"/usr/bin/qemu-system-x86_64", 7, 2}, c);
  EXPECT_EQ(Values(argv, "-chardev"), (std::vector<std::string>{"socket,id=agent,fd=6", "socket,id=egress,fd=11", "socket,id=qmp,fd=9"}));
  EXPECT_EQ(Values(argv, "-mon"), (std::vector<std::string>{"chardev=qmp,mode=control"}));
  EXPECT_EQ(Values(argv, "-incoming"), (std::vector<std::string>{"fd:10"}));
  // Saved stopped, but restored running.
  EXPECT_EQ(Values(argv, "-global"), (std::vector<std::string>{"migration.store-global-state=off"}));
  // The devices a snapshot holds are the same with and without these.
  VmConfig plain = TcgConfig();
  EXPECT_EQ(Values(argv, "-device"), Values(QemuArgv(Qemu{"/usr/bin/qemu-system-x86_64", 7, 2}, plain), "-device"));
}

TEST(ParseQemuVersion, reads_major_and_minor_and_rejects_anything_else) {
  auto v = ParseQemuVersion("QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)\nCopyright");
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, std::make_pair(7, 2));
  EXPECT_FALSE(ParseQemuVersion("qemu-system-x86_64: command not found"));
}

// A stand-in QEMU that counts how often it is asked its version.
class FakeQemu {
 public:
  FakeQemu() {
    Write("7.2.0");
    setenv("SMOLBOX_QEMU", path().c_str(), 1);
  }
  ~FakeQemu() {
    unsetenv("SMOLBOX_QEMU");
  }
  std::string path() const { return dir_.path() + "/qemu-system-x86_64"; }
  // A new binary, as a package upgrade would leave: another file in its place.
  void Write(const std::string& version) {
    std::string temp = path() + ".new";
    std::ofstream(temp) << "#!/bin/sh\necho asked >> " << dir_.path() << "/asked\necho 'QEMU emulator version " << version
                        << " (fake)'\n";
    chmod(temp.c_str(), 0755);
    std::filesystem::rename(temp, path());
  }
  int asked() const {
    std::ifstream in(dir_.path() + "/asked");
    int lines = 0;
    for (std::string line; std::getline(in, line);) ++lines;
    return lines;
  }

 private:
  smolbox::testing::TempDir dir_{"smolbox-fake-qemu"};
};

TEST(FindQemu, asks_a_binary_its_version_once_and_a_replaced_binary_again) {
  FakeQemu fake;
  auto first = FindQemu();
  ASSERT_TRUE(first) << first.error().ToString();
  EXPECT_EQ(std::make_pair(first->major, first->minor), std::make_pair(7, 2));
  auto second = FindQemu();
  ASSERT_TRUE(second);
  EXPECT_EQ(std::make_pair(second->major, second->minor), std::make_pair(7, 2));
  EXPECT_EQ(fake.asked(), 1) << "the version of an unchanged binary is remembered";
  fake.Write("9.1.0");
  auto upgraded = FindQemu();
  ASSERT_TRUE(upgraded);
  EXPECT_EQ(std::make_pair(upgraded->major, upgraded->minor), std::make_pair(9, 1));
  EXPECT_EQ(fake.asked(), 2);
}

TEST(FindQemu, refuses_a_binary_older_than_the_minimum_every_time) {
  FakeQemu fake;
  fake.Write("5.2.0");
  EXPECT_FALSE(FindQemu());
  auto again = FindQemu();
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().what.find("5.2"), std::string::npos) << again.error().ToString();
}

}  // namespace
}  // namespace smolbox::vm
