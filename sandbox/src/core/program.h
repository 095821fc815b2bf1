// Programs on the host: finding one on a PATH, and running one briefly for what it prints.
//
//   std::string qemu = FindOnPath(getenv("PATH"), "qemu-system-x86_64");
//   std::string version = RunCapture({qemu, "--version"}, 5000);
#pragma once

#include <string>
#include <vector>

namespace smolbox {

// How an empty entry of a PATH (leading, trailing or "::") reads. The runtime's own helpers
// (QEMU) are never taken from the current directory; a command that a user gave is found where
// execvp(3) would find it, and execvp reads an empty entry as the current directory.
enum class EmptyPathEntry { kSkip, kCurrentDir };

// The first executable regular file named program in the colon-separated dirs; "" if none.
std::string FindOnPath(const std::string& path, const std::string& program,
                       EmptyPathEntry empty = EmptyPathEntry::kSkip);

// Its stdout and stderr together, stdin from /dev/null; killed after timeout_ms, so that a
// program that hangs cannot hang the caller. "" when it cannot be started.
std::string RunCapture(const std::vector<std::string>& argv, int timeout_ms);

}  // namespace smolbox
