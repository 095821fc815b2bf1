// libarchive's reason for a failure, which it may not have (archive_error_string gives null).
#pragma once

#include <archive.h>

#include <string>

namespace smolbox::image {

inline std::string ArchiveError(archive* reader) {
  const char* reason = archive_error_string(reader);
  return reason != nullptr ? reason : "libarchive gave no reason";
}

}  // namespace smolbox::image
