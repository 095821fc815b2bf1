// Content digests as OCI writes them: "sha256:" and 64 lowercase hex digits.
//
//   SMOLBOX_ASSIGN_OR_RETURN(auto digest, Sha256Of(fd, copy_fd, 1 << 30, "layer.tar"));
//   if (digest != expected) ...
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "smolbox/error.h"

namespace smolbox::image {

// True for "sha256:<64 lowercase hex>"; the only algorithm accepted.
bool IsSha256Digest(std::string_view digest);
// The 64 hex digits of a digest IsSha256Digest accepts.
std::string DigestHex(std::string_view digest);

// The digest of fd read from its start to its end, copying each byte to copy_fd when that is
// not -1. More than max_bytes is an error naming `what`.
Expected<std::string> Sha256Of(int fd, int copy_fd, int64_t max_bytes, const std::string& what);
std::string Sha256Of(std::string_view bytes);

}  // namespace smolbox::image
