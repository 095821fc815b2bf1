// Parsing of human durations and sizes, as the CLI and specs take them.
//
//   ParseDuration("1.5s") -> 1500 (ms);  ParseSize("64M") -> 64 (MiB)
//   ParseSize("512K")     -> error (a size below 1 MiB cannot be represented)
//   ParseBytes("512K")    -> 524288
#pragma once

#include <cstdint>
#include <string_view>

#include "smolbox/error.h"

namespace smolbox {

// "250ms", "2s", "1.5m" or a bare number of milliseconds.
Expected<int64_t> ParseDuration(std::string_view text);
// "64K", "128M", "2G" or a bare number of MiB; returns bytes.
Expected<int64_t> ParseBytes(std::string_view text);
// As ParseBytes, in whole MiB; rejects sizes that are not a whole MiB.
Expected<int64_t> ParseSizeMiB(std::string_view text);

}  // namespace smolbox
