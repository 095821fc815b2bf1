// Reading host files without exceptions and without following what a sandbox planted.
//
// /proc files vanish mid-read when their process exits (read fails with ESRCH), and the case
// directories are writable by the workload under test, so every read here tolerates errors and
// refuses symlinks.
#ifndef SMOLVM_CHECK_HOST_FILES_H_
#define SMOLVM_CHECK_HOST_FILES_H_

#include <cstddef>
#include <optional>
#include <string>

namespace smolvm_check {

// Up to max_bytes of path; whatever was read before an error, or "" when it cannot be opened.
std::string ReadUpTo(const std::string& path, size_t max_bytes = 1 << 20);

// Up to max_bytes of the regular file at `relative` below `dir`, resolved without any symlink
// and without leaving `dir`; nullopt for anything else (a symlink, a FIFO, a device, a race).
std::optional<std::string> ReadRegularFileBeneath(const std::string& dir, const std::string& relative,
                                                  size_t max_bytes);

}  // namespace smolvm_check

#endif  // SMOLVM_CHECK_HOST_FILES_H_
