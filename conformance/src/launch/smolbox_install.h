// Where the smolbox under test is installed: its binary, and its vm backend's guest artifacts.
// The profile loader renders the binary into smolbox:* commands; the host probe and bench look
// for the guest where smolbox itself will.
//
//   std::string smolbox = SmolboxBinary();  // $SMOLBOX, else the smolbox next to smolvm-check
//   std::string guest = smolbox::GuestDir(); // core/guest_dir.h: where smolbox itself looks
#pragma once

#include <string>

#include "guest_dir.h"

namespace smolvm_check {

// The running executable's path, or "" when it cannot be known.
std::string ThisExecutable();

// $SMOLBOX when set; else the smolbox next to the running executable, or "smolbox" (on PATH)
// when that cannot be known.
std::string SmolboxBinary();

// The guest's directory is smolbox's own rule, smolbox::GuestDir().
using smolbox::GuestDir;
using smolbox::GuestDirToRun;

}  // namespace smolvm_check
