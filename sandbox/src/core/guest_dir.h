// Where the vm backend's guest artifacts live: the one rule that smolbox reads them by, that
// scripts/build-guest writes them by (it asks `smolbox --print-guest-dir`) and that the host
// report checks them by.
#pragma once

#include <string>

namespace smolbox {

// $SMOLBOX_GUEST_DIR; else /var/cache/smolbox/guest for root; else
// $XDG_CACHE_HOME/smolbox/guest when XDG_CACHE_HOME is absolute (the XDG rule: a relative one
// is ignored); else $HOME/.cache/smolbox/guest; "" when none of these is set.
std::string GuestDir();
// Where a run reads the guest from: GuestDir(), or for a user who has built none there (no
// manifest.json), the one root built for the host, which any user may read.
std::string GuestDirToRun();

}  // namespace smolbox
