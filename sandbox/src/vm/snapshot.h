// Boot snapshots: a guest booted once to "agent ready", saved by QEMU (stop, migrate to a
// file), and restored by later VMs of the same configuration instead of booting (0.3-0.4 s
// against ~2 s under TCG). docs/guest.md, "Boot snapshot", has the whole story.
//
// The snapshot is taken before the per-run "setup" message (guest_protocol.h): it holds the
// booted kernel and the idle agent, never a run's shares, files or workload. Its 9p shares
// are not mounted yet either, which is what lets QEMU migrate them.
//
//   auto key = MakeSnapshotKey(qemu, guest, config);
//   auto store = SnapshotStore::Open();
//   auto file = store->OpenForRestore(*key);   // an fd at QEMU's stream, or nullopt
//   ... -incoming fd:N; on failure: store->Discard(*key, fd) and boot ...
//   auto pending = store->Begin(*key);          // a temp file, header written
//   SaveVm(qmp, pending->fd.get(), ...); store->Commit(*pending);
#pragma once

#include <optional>
#include <string>

#include "guest_artifacts.h"
#include "qemu_command.h"
#include "qmp.h"
#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::vm {

// What a snapshot must match to be restored: the QEMU binary and version, the guest
// artifacts (manifest.json's content; identity and mtime of vmlinux, initramfs.cpio,
// rootfs.erofs) and the QEMU command line with its descriptor numbers blanked out. The
// command line holds everything that shapes the machine: RAM, vCPUs, the accelerator, the
// devices and the 9p shares (storage, then one per ro volume).
struct SnapshotKey {
  std::string text;  // one "name=value" per line; the file's header repeats it
  std::string name;  // the file name: a hash of text
};

// config without qmp_fd and incoming_fd, as the VM would boot.
Expected<SnapshotKey> MakeSnapshotKey(const Qemu& qemu, const GuestArtifacts& guest, const VmConfig& config);

// A snapshot being written: a temp file in the store, renamed into place once complete.
struct PendingSnapshot {
  std::string temp_name;
  std::string name;
  UniqueFd fd;  // positioned after the header, where QEMU's stream goes
};

// <state root>/snapshots: root's, 0700, never followed through a symlink; at most
// kKeptSnapshots files, the least recently used pruned. It is a tmpfs (/run): a snapshot
// (~80 MB: only the pages the boot touched) costs that much RAM, and none outlives the host's
// boot, which keeps a snapshot from meeting other hardware.
class SnapshotStore {
 public:
  static constexpr size_t kKeptSnapshots = 4;

  static Expected<SnapshotStore> Open();

  std::string PathOf(const SnapshotKey& key) const { return path_ + "/" + key.name; }
  // The snapshot of key, positioned at QEMU's stream; nullopt when there is none. An error
  // when one is there but its header says it is stale or corrupt.
  Expected<std::optional<UniqueFd>> OpenForRestore(const SnapshotKey& key);
  // Marks it used (its mtime orders the pruning).
  void Touch(int fd);
  // Removes key's snapshot if it is still the file fd holds: a concurrent run may have
  // replaced it with a good one already.
  void Discard(const SnapshotKey& key, int fd);

  Expected<PendingSnapshot> Begin(const SnapshotKey& key);
  // Renames it into place (atomic: a concurrent first run's rename wins or loses whole).
  Expected<void> Commit(PendingSnapshot& pending);
  void Abandon(PendingSnapshot& pending);

 private:
  SnapshotStore(std::string path, UniqueFd dir) : path_(std::move(path)), dir_(std::move(dir)) {}
  void Prune();

  std::string path_;
  UniqueFd dir_;
};

// Stops the VM and saves it into file (QMP: getfd, stop, migrate fd:, query-migrate until
// done). QEMU migrates into a socket and the runtime copies that into file: QEMU never holds
// the file, so a workload that later takes over this QEMU cannot rewrite what other VMs
// restore. The VM is left stopped: ResumeVm() runs it on.
Expected<void> SaveVm(Qmp& qmp, int file, int timeout_ms);
Expected<void> ResumeVm(Qmp& qmp, int timeout_ms);

}  // namespace smolbox::vm
