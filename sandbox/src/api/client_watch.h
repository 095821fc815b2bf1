// Work done for a client that may hang up while it waits: a one-shot run gives no output until
// its result, so nothing would fail to reach a client that went away, and the run would go on
// to its timeout for nobody.
//
//   bool there = RunForClient([&](int cancel_fd) { result = launcher.Run(..., cancel_fd); },
//                             [&sink] { return sink.is_writable(); }, server_cancel_fd);
//
// work runs on a thread of its own; cancel_fd becomes readable once connected() turns false or
// server_cancel_fd (the server's own shutdown) becomes readable, and work is expected to end
// soon after. Returns whether the client was still there when work ended.
#pragma once

#include <functional>

namespace smolbox::api {

bool RunForClient(const std::function<void(int cancel_fd)>& work, const std::function<bool()>& connected,
                  int server_cancel_fd);

}  // namespace smolbox::api
