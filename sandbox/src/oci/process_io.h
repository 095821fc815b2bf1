// What a container's monitor and an exec's monitor share: the signals that end their process,
// taken through a signalfd, and the pty an engine asks for with a console socket.
//
//   auto signals = BlockEndingSignals();        // kill's SIGTERM now ends the exec, not us
//   session->Exec(spec, io, signals->get());
//   int signal = TakeSignal(signals->get());    // 0, or what ended it
#pragma once

#include <string>

#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::oci {

// Blocks the signals `kill` may send a monitor to end its process cleanly, and returns a
// signalfd for them, which an exec takes as its cancel fd. SIGKILL ends a monitor outright.
Expected<UniqueFd> BlockEndingSignals();
// The pending signal's number, or 0.
int TakeSignal(int signal_fd);
// A pty of the host's devpts whose master goes to the engine's console socket, as runc sends
// it; the returned slave is the process's stdio.
Expected<UniqueFd> OpenConsole(const std::string& socket_path);
// Tells the runtime waiting on a monitor's ready pipe how it went, in one line (empty: it
// went well), and closes the pipe. False when no one is left to read it (SIGPIPE is blocked in a
// monitor, so the write fails with EPIPE).
bool ReportReady(int ready_fd, const std::string& line);
// With a terminal, the pty from OpenConsole, and the monitor's own stdio let go for /dev/null
// (an engine may read the runtime's stdio to its end, as docker's shim does); without one, an
// invalid fd: the process takes the monitor's stdio.
Expected<UniqueFd> TakeConsole(bool terminal, const std::string& socket_path);

}  // namespace smolbox::oci
