// A QEMU Machine Protocol client on one connected socket (QEMU's `-chardev socket,fd=N -mon
// chardev=...,mode=control`): just enough to stop a VM and save it.
//
//   Qmp qmp(std::move(host_end));
//   if (auto ok = qmp.Handshake(5000); !ok) ...
//   auto status = qmp.Execute("query-migrate", {}, 5000);   // the "return" object
//   qmp.Execute("getfd", {{"fdname", "snapshot"}}, 5000, file.get());  // with SCM_RIGHTS
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::vm {

class Qmp {
 public:
  explicit Qmp(UniqueFd socket) : socket_(std::move(socket)) {}

  // Reads the greeting and leaves capabilities negotiation mode.
  Expected<void> Handshake(int timeout_ms);
  // Runs one command and returns its "return" value; QEMU's "error" is an Error naming the
  // command. pass_fd, if >= 0, travels with the command (QMP's getfd takes it from there).
  Expected<nlohmann::json> Execute(const std::string& command, const nlohmann::json& arguments,
                                   int timeout_ms, int pass_fd = -1);

 private:
  Expected<void> Send(const std::string& line, int pass_fd);
  // The next object that is not an asynchronous event.
  Expected<nlohmann::json> NextReply(const std::string& what, int timeout_ms);

  UniqueFd socket_;
  std::string buffer_;
};

}  // namespace smolbox::vm
