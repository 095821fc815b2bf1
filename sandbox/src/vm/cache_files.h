// What the vm backend's caches (boot snapshots, QEMU's version) need of files: which file an fd
// is without reading it, a small file's text, and a replace that readers never see half done.
// Cache files live in directories of our own (0700), and are never opened through a symlink.
#pragma once

#include <string>

namespace smolbox::vm {

// "dev=.. ino=.. size=.. mtime=s.ns", or "unknown" when fstat fails. Replacing a file (a package
// upgrade, a rebuild) changes at least one of them.
std::string FileIdentity(int fd);

// Up to 1 MiB of the file's text; empty when it cannot be opened.
std::string ReadSmallFile(const std::string& path);

// Writes text to a temp file next to path and renames it over path; false on any failure,
// leaving no temp file.
bool ReplaceFile(const std::string& path, const std::string& text);

}  // namespace smolbox::vm
