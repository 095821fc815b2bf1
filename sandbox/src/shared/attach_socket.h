// The attach socket of a sandbox (SandboxSpec::attach_socket): a unix socket at a path of the
// runtime's, whose every connection the sandbox serves with an agent of its own (the agent's
// attach_point.h). The ns backend listens; `smolbox oci exec` connects and then speaks the
// agent's exec protocol on the connection, as the sandbox's own channel does.
#pragma once

#include <string>

#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::shared {

// Binds and listens at path, which must not exist yet; the socket is 0600 (its directory is
// the runtime's). The descriptor is CLOEXEC.
Expected<UniqueFd> ListenAttachSocket(const std::string& path);
// A blocking connection to the sandbox listening at path.
Expected<UniqueFd> ConnectAttachSocket(const std::string& path);

}  // namespace smolbox::shared
