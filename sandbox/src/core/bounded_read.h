// A file read whole, but only within a bound: manifests, configs, records and accounts files
// come from images and stores that may be hostile, and must not make smolbox read without end.
//
//   SMOLBOX_ASSIGN_OR_RETURN(auto text, ReadBounded(fd.get(), 4 << 20, "index.json of app.tar"));
#pragma once

#include <cstddef>
#include <string>

#include "smolbox/error.h"

namespace smolbox {

// All of fd's content from its offset on; an error naming `what` once it holds more than
// max_bytes, or when a read fails.
Expected<std::string> ReadBounded(int fd, size_t max_bytes, const std::string& what);

}  // namespace smolbox
