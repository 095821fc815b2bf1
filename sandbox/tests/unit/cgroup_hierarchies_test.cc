#include "cgroup_hierarchies.h"

#include <gtest/gtest.h>

namespace smolbox {
namespace {

// This machine's kind of host: memory, cpu and pids on v1, a v2 with few controllers.
constexpr const char* kHybridMountinfo =
    "30 23 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755\n"
    "31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec shared:10 - cgroup2 cgroup2 rw\n"
    "32 30 0:28 / /sys/fs/cgroup/systemd rw,nosuid shared:11 - cgroup cgroup rw,xattr,name=systemd\n"
    "35 30 0:31 / /sys/fs/cgroup/memory rw,nosuid shared:15 - cgroup cgroup rw,memory\n"
    "36 30 0:32 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:16 - cgroup cgroup rw,cpu,cpuacct\n"
    "37 30 0:33 / /sys/fs/cgroup/pids rw,nosuid shared:17 - cgroup cgroup rw,pids\n"
    "38 23 0:40 / /mnt/with\\040space rw shared:20 - cgroup2 cgroup2 rw\n"
    "malformed line without a dash\n";
constexpr const char* kHybridSelf =
    "12:pids:/user.slice\n"
    "4:cpu,cpuacct:/\n"
    "3:memory:/user.slice/session-1.scope\n"
    "1:name=systemd:/user.slice/session-1.scope\n"
    "0::/user.slice/session-1.scope\n";

TEST(CgroupHierarchies, a_hybrid_host_maps_each_v1_controller_and_the_first_v2_mount) {
  CgroupHierarchies h = ParseCgroupHierarchies(kHybridMountinfo, kHybridSelf);
  ASSERT_TRUE(h.v2_mount);
  EXPECT_EQ(*h.v2_mount, "/sys/fs/cgroup/unified");
  EXPECT_EQ(h.v2_self, "/user.slice/session-1.scope");
  EXPECT_EQ(h.v1_mount, (std::map<std::string, std::string>{{"memory", "/sys/fs/cgroup/memory"},
                                                            {"cpu", "/sys/fs/cgroup/cpu,cpuacct"},
                                                            {"cpuacct", "/sys/fs/cgroup/cpu,cpuacct"},
                                                            {"pids", "/sys/fs/cgroup/pids"}}))
      << "mount options (rw, xattr, name=systemd) are not controllers";
  EXPECT_EQ(h.v1_self["memory"], "/user.slice/session-1.scope");
  EXPECT_EQ(h.v1_self["cpu"], "") << "the root cgroup is the empty path";
  EXPECT_EQ(h.v1_self["pids"], "/user.slice");
}

TEST(CgroupHierarchies, a_v2_only_host_has_no_v1_controllers) {
  CgroupHierarchies h = ParseCgroupHierarchies("28 22 0:25 / /sys/fs/cgroup rw shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
                                               "0::/system.slice/runner.service\n");
  EXPECT_EQ(h.v2_mount, "/sys/fs/cgroup");
  EXPECT_EQ(h.v2_self, "/system.slice/runner.service");
  EXPECT_TRUE(h.v1_mount.empty());
}

TEST(CgroupHierarchies, a_mount_point_with_a_space_is_decoded) {
  CgroupHierarchies h = ParseCgroupHierarchies("38 23 0:40 / /mnt/with\\040space rw shared:20 - cgroup2 cgroup2 rw\n", "");
  EXPECT_EQ(h.v2_mount, "/mnt/with space");
}

TEST(CgroupHierarchies, nothing_mounted_gives_nothing) {
  CgroupHierarchies h = ParseCgroupHierarchies("", "");
  EXPECT_FALSE(h.v2_mount);
  EXPECT_TRUE(h.v1_mount.empty());
  EXPECT_TRUE(DiscoverCgroupHierarchies().v2_mount || !DiscoverCgroupHierarchies().v1_mount.empty())
      << "this host has cgroups mounted";
}

}  // namespace
}  // namespace smolbox
