#include "guest_protocol.h"

#include <fmt/format.h>

#include "json_message.h"
#include "mutant.h"
#include "trust_store.h"
#include "smolbox/spec.h"

namespace smolbox {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(GuestVolume, target, read_only, tag, storage_dir)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(GuestSetup, volumes, workdir, uid, gid, memory_bytes, pids, cpus,
                                   egress, image_root, ca_bundle, hostname, writable_root_mib,
                                   root_files, prewarm)
// The seed is the message's tail, not a field.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(GuestRestore, realtime_sec, realtime_nsec, hostname)

namespace {
// Linux's HOST_NAME_MAX.
constexpr size_t kMaxHostnameBytes = 64;
}  // namespace

channel::Message EncodeGuestSetup(const GuestSetup& setup) {
  nlohmann::json header = setup;
  header["type"] = "setup";
#ifdef SMOLBOX_MUTANTS
  // The guest's own switches (its namespaces, its mounts) act at setup, before any exec order.
  mutant::AddDisabledTo(header);
#endif
  return channel::Message{std::move(header), ""};
}

Expected<GuestSetup> DecodeGuestSetup(const channel::Message& m) {
  if (m.Type() != "setup") return std::unexpected(Error{"channel", "expected a setup message", 0});
  // One volume, to give the kind of each.
  static const MessageShape shape(
      GuestSetup{.volumes = {GuestVolume{}}, .root_files = {{"", ""}}});
#ifdef SMOLBOX_MUTANTS
  nlohmann::json header = m.header;
  SMOLBOX_TRY(mutant::TakeDisabledFrom(header));
  SMOLBOX_ASSIGN_OR_RETURN(GuestSetup setup, DecodeMessage<GuestSetup>(header, shape, "setup message"));
#else
  SMOLBOX_ASSIGN_OR_RETURN(GuestSetup setup,
                           DecodeMessage<GuestSetup>(m.header, shape, "setup message"));
#endif
  // The agent multiplies it into cpu.max's quota: a cast, undefined beyond int64_t.
  if (!(setup.cpus >= 0 && setup.cpus <= kMaxCpus)) {
    return std::unexpected(
        Error{"setup message",
              fmt::format("cpus must be from 0 to {} (got {})", kMaxCpus, setup.cpus), 0});
  }
  if (setup.hostname.empty() || setup.hostname.size() > kMaxHostnameBytes) {
    return std::unexpected(Error{"setup message", "the hostname must be 1 to 64 bytes", 0});
  }
  if (setup.writable_root_mib < 0 || setup.writable_root_mib > kMaxStorageMiB) {
    return std::unexpected(Error{"setup message", "writable_root_mib is out of range", 0});
  }
  if (setup.root_files.size() > kMaxRootFiles) {
    return std::unexpected(Error{"setup message", "too many root files", 0});
  }
  if (!setup.prewarm.empty() && setup.prewarm != "python") {
    return std::unexpected(Error{"setup message", "prewarm must be python or empty", 0});
  }
  if (auto bundle = CheckCaBundle(setup.ca_bundle); !bundle) {
    return std::unexpected(Error{"setup message", bundle.error().ToString(), 0});
  }
  return setup;
}

channel::Message EncodeGuestRestore(const GuestRestore& restore) {
  nlohmann::json header = restore;
  header["type"] = "restored";
  return channel::Message{std::move(header), restore.seed};
}

Expected<GuestRestore> DecodeGuestRestore(const channel::Message& m) {
  if (m.Type() != "restored") return std::unexpected(Error{"channel", "expected a restored message", 0});
  static const MessageShape shape{GuestRestore{}};
  SMOLBOX_ASSIGN_OR_RETURN(GuestRestore restore,
                           DecodeMessage<GuestRestore>(m.header, shape, "restored message"));
  restore.seed = m.tail;
  if (restore.seed.size() != kRestoreSeedBytes) {
    return std::unexpected(Error{
        "restored message",
        fmt::format("the seed is {} bytes, not {}", restore.seed.size(), kRestoreSeedBytes), 0});
  }
  return restore;
}

}  // namespace smolbox
