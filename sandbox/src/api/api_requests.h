// What the API accepts, checked before anything starts: every error names the field at fault,
// as the CLI's do.
//
// A client of the API may be another user's service (over TCP with a token): it names no host
// path. Volumes, a stdin file, a rootfs directory image and an egress netns are refused; bytes
// go in as stdin, and images come from the store by name.
#pragma once

#include <optional>
#include <string>

#include "smolbox/error.h"
#include "smolbox/spec.h"

namespace smolbox::api {

// POST /v1/run: a RunSpec, as a --spec file holds one, with a command.
Expected<RunSpec> ParseRunRequest(const std::string& body);

// POST /v1/sandboxes: a RunSpec without a command. Its exec part is each exec's default.
Expected<RunSpec> ParseCreateRequest(const std::string& body);

}  // namespace smolbox::api
