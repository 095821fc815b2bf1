// The agent as /init of a microVM: everything between the kernel starting it and the agent
// saying "ready", with no busybox and no shell.
//
//   auto channel = BootGuest();   // mounts, modules, the rootfs image, the channel port
//   ... serve; each run's "setup" then calls SetUpGuestRun() (guest_run.h) ...
//   PowerOff();
//
// After BootGuest the agent's own root is a small tmpfs that looks like a host to the
// namespace code: /usr, /bin, /lib* are the read-only rootfs image, /etc holds the loader
// cache, and /proc, /sys (with cgroup2) and /dev are mounted. It is no longer the initramfs,
// so pivot_root works for the workload's root later.
#pragma once

#include <string>

#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::agent {

// Where the cgroup2 hierarchy is mounted in the agent's view.
inline constexpr const char* kGuestCgroupRoot = "/sys/fs/cgroup";

// The initramfs's smolbox-egress-setup, its loader and libraries (lib/) and the modules of
// egress's redirect (modules/); the host view keeps them here, read-only.
inline constexpr const char* kEgressSetupDir = "/egress";

// Loads the modules dir/order lists, in that order (scripts/build-guest wrote it dependencies
// first); none when there is no order.
Expected<void> LoadModules(const std::string& dir);

// /dev/vportNpM of the virtio-serial port named name, or "" when there is none.
std::string FindVirtioPort(const char* name);

// True when this process was started by the kernel as init (PID 1, no arguments).
bool StartedAsGuestInit(int argc);

// Returns the agent's channel: the virtio-serial port named kAgentPortName.
Expected<UniqueFd> BootGuest();

// Ends the VM; QEMU exits on it (-no-reboot).
[[noreturn]] void PowerOff();

}  // namespace smolbox::agent
