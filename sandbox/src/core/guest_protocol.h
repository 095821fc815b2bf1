// The microVM's one extra message: after the agent in the guest says "ready", the host sends
// "setup" with what this run needs (shares, workdir, user, the workload cgroup's limits), and
// the agent answers "setup_done" or "setup_error" before any "exec".
//
// Everything per-run travels here, not on the kernel command line, so that a VM booted once
// can serve many runs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "channel.h"
#include "smolbox/error.h"

namespace smolbox {

// The 9p tag of the run's storage share: /tmp, the workdir, /dev/shm and rw volume copies.
inline constexpr const char* kStorageTag = "storage";
// The virtio-serial port the agent's channel runs over.
inline constexpr const char* kAgentPortName = "smolbox.agent";

struct GuestVolume {
  std::string target;       // absolute path inside the sandbox
  bool read_only = true;
  std::string tag;          // ro: the 9p tag of its share
  std::string storage_dir;  // rw: its copy in the storage share
};

struct GuestSetup {
  std::vector<GuestVolume> volumes;
  std::string workdir = "/work";
  uint32_t uid = 0;  // the workload's, for /etc/passwd and the storage's owner
  uint32_t gid = 0;
  int64_t memory_bytes = 0;  // the workload cgroup's memory.max
  int64_t pids = 0;          // pids.max
  double cpus = 0;           // cpu.max as a fraction of one CPU; 0: none
};

channel::Message EncodeGuestSetup(const GuestSetup& setup);
Expected<GuestSetup> DecodeGuestSetup(const channel::Message& message);

}  // namespace smolbox
