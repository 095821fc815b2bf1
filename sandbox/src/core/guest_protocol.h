// The microVM's one extra message: after the agent in the guest says "ready", the host sends
// "setup" with what this run needs (shares, workdir, user, the workload cgroup's limits), and
// the agent answers "setup_done" or "setup_error" before any "exec".
//
// Everything per-run travels here, not on the kernel command line, so that a VM booted once
// can serve many runs.
//
// A VM restored from a boot snapshot (src/vm/snapshot.h) says nothing on its own: it is the
// snapshot's VM, which already said "ready". The host sends "restored" first (fresh entropy,
// the wall-clock time, the hostname), the agent answers "restored_done" or "restore_error",
// and "setup" follows as after a boot. The VM that made the snapshot gets "restored" too, as
// it shares the snapshot's entropy.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "channel.h"
#include "smolbox/error.h"

namespace smolbox {

// The 9p tag of the run's storage share: /tmp, the workdir, /dev/shm and rw volume copies.
inline constexpr const char* kStorageTag = "storage";
// The virtio-serial port the agent's channel runs over.
inline constexpr const char* kAgentPortName = "smolbox.agent";
// The hostname in every sandbox, ns and vm alike.
inline constexpr const char* kGuestHostname = "sandbox";
// Guest ids [kGuestIdBase, kGuestIdBase + 65536) back the ids of the workload's user namespace
// inside the guest, as kHostIdBase's range backs an ns sandbox's on the host: uid 0 of a
// `--user root` workload is guest uid kGuestIdBase, nobody to the guest kernel. QEMU's 9p
// shares show the storage as owned by kGuestIdBase + the workload's uid.
inline constexpr uint32_t kGuestIdBase = 100000;
// Bytes of host randomness a restored guest mixes into its pool.
inline constexpr size_t kRestoreSeedBytes = 64;

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
  // Whether the workload may reach the network: its connections and DNS then go through the
  // egress port (egress_link.h) to the host's gateway.
  bool egress = false;
  // The disk is an image from the store, not the host image: it becomes the workload's root
  // with its own /etc, as a rootfs directory does on the ns backend.
  bool image_root = false;
  // PEM certificates for the workload's trust store (SandboxSpec::ca_bundle); empty: none.
  std::string ca_bundle{};
  // An OCI container's (SandboxSpec::hostname, writable_root, root_files): the guest's hostname,
  // the MiB an image's root takes writes in (0: read-only), and files written into that root.
  std::string hostname = kGuestHostname;
  int64_t writable_root_mib = 0;
  std::map<std::string, std::string> root_files{};
  // SandboxSpec::prewarm: "python" starts the agent's zygote (agent/zygote.h); empty: none.
  std::string prewarm{};
};

channel::Message EncodeGuestSetup(const GuestSetup& setup);
Expected<GuestSetup> DecodeGuestSetup(const channel::Message& message);

struct GuestRestore {
  std::string seed;  // kRestoreSeedBytes from the host's getrandom(); travels as the tail
  int64_t realtime_sec = 0;  // the host's CLOCK_REALTIME when it sent the message
  int64_t realtime_nsec = 0;
  std::string hostname = kGuestHostname;
};

channel::Message EncodeGuestRestore(const GuestRestore& restore);
Expected<GuestRestore> DecodeGuestRestore(const channel::Message& message);

}  // namespace smolbox
