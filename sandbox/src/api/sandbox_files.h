// PUT and GET /v1/sandboxes/{id}/files/{path}: a file into or out of a sandbox's storage.
//
// Both are done inside the sandbox, as an exec of its own /bin/sh and cat: the host opens no
// path of the sandbox's, so a link the workload planted can lead nowhere but into the sandbox
// itself, and an upload counts against the sandbox's storage like any write of its own. As for
// volumes, only regular files are read or replaced: a final symbolic link is refused, not
// followed, and an upload lands whole or not at all (written beside, then renamed over).
// An image without /bin/sh and cat cannot use these (the error says so).
#pragma once

#include <expected>
#include <string>

#include "smolbox/error.h"

namespace smolbox::api {

// A refusal and the HTTP status it is answered with.
struct FileError {
  int status;
  Error error;
};

// "work/data.csv" (the URL's tail) -> "/work/data.csv": no empty, "." or ".." component, no
// NUL, at most 4096 bytes.
std::expected<std::string, FileError> SandboxPath(const std::string& tail);

// Writes bytes to path in the sandbox, making its parent directories; returns the size written.
std::expected<size_t, FileError> WriteSandboxFile(const std::string& sandbox, const std::string& path,
                                                  const std::string& bytes, int cancel_fd);
// Reads the regular file at path, up to the sandbox's output limit (limits.output_bytes).
std::expected<std::string, FileError> ReadSandboxFile(const std::string& sandbox, const std::string& path,
                                                      int cancel_fd);

}  // namespace smolbox::api
