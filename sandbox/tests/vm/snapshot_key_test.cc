// The boot snapshot's key, without a VM: what must make a new snapshot, and what must not.
#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "test_support.h"
#include "vm/snapshot.h"

namespace smolbox::vm {
namespace {

using smolbox::testing::TempDir;

struct Fixture {
  TempDir dir;
  GuestArtifacts guest;
  Qemu qemu{"/bin/sh", 7, 2};  // any file: the key takes its identity and the version given

  Fixture() {
    guest.dir = dir.path();
    dir.Write("manifest.json", R"({"format": 1})");
    for (auto [fd, name] : {std::pair{&guest.kernel, "vmlinux"}, {&guest.initramfs, "initramfs.cpio"},
                            {&guest.rootfs, "rootfs.erofs"}}) {
      fd->Reset(open(dir.Write(name, name).c_str(), O_RDONLY | O_CLOEXEC));
    }
  }

  VmConfig Config(int first_fd) const {
    VmConfig c;
    c.accel = Accel::kTcg;
    c.memory_mib = 704;
    c.vcpus = 1;
    c.kernel = fmt::format("/proc/self/fd/{}", first_fd);
    c.initramfs = fmt::format("/proc/self/fd/{}", first_fd + 1);
    c.rootfs = fmt::format("/proc/self/fd/{}", first_fd + 2);
    c.channel_fd = first_fd + 3;
    c.egress_fd = first_fd + 5;
    c.tsc_khz = 2596136 + first_fd;
    c.shares = {{"storage", fmt::format("/proc/self/fd/{}", first_fd + 4), false}};
    return c;
  }

  std::string Name(const VmConfig& c) const {
    auto key = MakeSnapshotKey(qemu, guest, c);
    EXPECT_TRUE(key) << key.error().ToString();
    return key ? key->name : "";
  }
};

TEST(SnapshotKey, ignores_descriptor_numbers_the_tsc_reading_and_the_snapshot_flags) {
  Fixture f;
  VmConfig a = f.Config(3);
  VmConfig b = f.Config(11);
  b.qmp_fd = 20;
  b.incoming_fd = 21;
  EXPECT_EQ(f.Name(a), f.Name(b));
}

TEST(SnapshotKey, changes_with_memory_vcpus_accel_shares_and_qemu_version) {
  Fixture f;
  VmConfig base = f.Config(3);
  std::string name = f.Name(base);
  VmConfig c = base;
  c.memory_mib = 705;
  EXPECT_NE(f.Name(c), name);
  c = base;
  c.vcpus = 2;
  EXPECT_NE(f.Name(c), name);
  c = base;
  c.accel = Accel::kKvm;
  EXPECT_NE(f.Name(c), name);
  c = base;
  c.shares.push_back({"ro0", "/proc/self/fd/9", true});
  EXPECT_NE(f.Name(c), name);
  Fixture g;
  g.qemu.minor = 1;
  EXPECT_NE(g.Name(base), f.Name(base)) << "another QEMU version";
}

TEST(SnapshotKey, changes_when_a_guest_artifact_or_the_manifest_changes) {
  Fixture f;
  VmConfig c = f.Config(3);
  auto before = MakeSnapshotKey(f.qemu, f.guest, c);
  ASSERT_TRUE(before);
  f.dir.Write("manifest.json", R"({"format": 1, "agent_sha256": "other"})");
  EXPECT_NE(f.Name(c), before->name);
  // A rebuilt initramfs is a new file (scripts/build-guest renames one into place).
  f.guest.initramfs.Reset(open(f.dir.Write("initramfs.new", "another agent").c_str(), O_RDONLY | O_CLOEXEC));
  std::string after_manifest = f.Name(c);
  Fixture g;  // same contents, other files
  EXPECT_NE(g.Name(c), before->name);
  EXPECT_NE(after_manifest, before->name);
}

}  // namespace
}  // namespace smolbox::vm
