#include "launch/interrupt.h"

#include <csignal>

namespace smolvm_check {
namespace {

volatile std::sig_atomic_t g_signal = 0;
struct sigaction g_old_int {};
struct sigaction g_old_term {};

void OnSignal(int sig) { g_signal = sig; }

}  // namespace

InterruptScope::InterruptScope() {
  g_signal = 0;
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &g_old_int);
  sigaction(SIGTERM, &action, &g_old_term);
}

InterruptScope::~InterruptScope() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

bool Interrupted() { return g_signal != 0; }

int InterruptSignal() { return g_signal; }

}  // namespace smolvm_check
