// Where the smolbox under test is installed: its binary, and its vm backend's guest artifacts.
// The profile loader renders the binary into smolbox:* commands; the host probe and bench look
// for the guest where smolbox itself will.
//
//   std::string smolbox = SmolboxBinary();  // $SMOLBOX, else the smolbox next to smolvm-check
//   std::string guest = GuestDir();         // e.g. /var/cache/smolbox/guest for root
#pragma once

#include <string>

namespace smolvm_check {

// $SMOLBOX when set; else the smolbox next to the running executable, or "smolbox" (on PATH)
// when that cannot be known.
std::string SmolboxBinary();

// Where scripts/build-guest puts the vm backend's guest artifacts, and where smolbox looks.
std::string GuestDir();

}  // namespace smolvm_check
