// SIGINT and SIGTERM as a request to stop: within an InterruptScope they only set a flag, which
// long loops check between steps so that they can clean up (remove a branch, a sandbox) before
// returning. The previous handlers come back when the scope ends. No SA_RESTART, so a sleep or
// a poll ends at once.
//
//   InterruptScope scope;
//   for (...) { if (Interrupted()) break; ... }
#pragma once

namespace smolvm_check {

class InterruptScope {
 public:
  InterruptScope();
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;
};

bool Interrupted();
// The signal that interrupted, 0 if none.
int InterruptSignal();

}  // namespace smolvm_check
