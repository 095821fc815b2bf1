// The sandbox's network namespace: loopback only, and no route anywhere else.
#pragma once

#include "smolbox/error.h"

namespace smolbox::confine {

// Brings up `lo` in the current (new) network namespace.
Expected<void> BringUpLoopback();

}  // namespace smolbox::confine
