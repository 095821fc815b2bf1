// What the API accepts, checked before anything starts: every error names the field at fault,
// as the CLI's do.
//
// A client of the API may be another user's service (over TCP with a token): it names no host
// path of its own choosing. A stdin file, a rootfs directory image and an egress netns are
// refused; bytes go in as stdin, and images come from the store by name. Volumes are refused
// unless the server has a volume root (serve --volume-root): then a volume's source is a path
// relative to it, opened beneath it without following any symlink.
#pragma once

#include <optional>
#include <string>

#include "smolbox/error.h"
#include "smolbox/spec.h"

namespace smolbox::api {

// POST /v1/run: a RunSpec, as a --spec file holds one, with a command.
// volume_root: the server's --volume-root, or empty.
Expected<RunSpec> ParseRunRequest(const std::string& body, const std::string& volume_root = "");

// POST /v1/sandboxes: a RunSpec without a command. Its exec part is each exec's default.
Expected<RunSpec> ParseCreateRequest(const std::string& body, const std::string& volume_root = "");

}  // namespace smolbox::api
