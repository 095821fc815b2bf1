// What a microVM restored from a boot snapshot must not share with its siblings: every VM
// restored from one snapshot wakes with the same entropy pool, the snapshot's clock and its
// hostname. The host's "restored" message brings fresh ones.
//
//   auto restore = DecodeGuestRestore(message);
//   if (auto ok = FreshenRestoredGuest(*restore); !ok) ...   // reply restore_error
#pragma once

#include "guest_protocol.h"
#include "smolbox/error.h"

namespace smolbox::agent {

// Rekeys the CRNG from its pool now. Called at the snapshot point ("ready"): the kernel's next
// scheduled reseed is then a whole interval (a second, early in boot) after it, so until the
// "restored" message every VM restored from one snapshot would read the same stream. That is
// what FreshenRestoredGuest ends, and it is a window wide enough for a test to see whether it
// does.
Expected<void> ReseedCrng();

// Mixes the host's seed into the pool and reseeds the CRNG, so no two restored VMs read the
// same random numbers; sets CLOCK_REALTIME and the hostname.
Expected<void> FreshenRestoredGuest(const GuestRestore& restore);

}  // namespace smolbox::agent
