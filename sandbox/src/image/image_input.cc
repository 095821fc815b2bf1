#include "image_input.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <memory>

#include "archive_error.h"
#include "bounded_read.h"
#include "beneath.h"
#include "image_manifest.h"

namespace smolbox::image {
namespace {

// Links in a docker save tar go one step (a repeated layer to its first copy); a few more
// allow for any tool's, and bound a loop.
constexpr int kMaxLinkHops = 8;

// A link's target, as an entry path of the same tar: relative to the link's directory for a
// symlink, to the tar's root for a hardlink. Empty when it leaves the tar.
std::string LinkedEntry(const std::vector<std::string>& link, const std::string& target, bool symlink) {
  if (target.starts_with('/')) return "";
  std::vector<std::string> parts;
  if (symlink) parts.assign(link.begin(), link.end() - 1);
  size_t start = 0;
  while (start <= target.size()) {
    size_t end = target.find('/', start);
    if (end == std::string::npos) end = target.size();
    std::string part = target.substr(start, end - start);
    if (part == "..") {
      if (parts.empty()) return "";
      parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    start = end + 1;
  }
  return JoinPath(parts, parts.size());
}

}  // namespace

Expected<ImageInput> ImageInput::Open(const std::string& path, int staging_fd, int64_t max_bytes,
                                      int64_t max_entries, Files files) {
  ImageInput input;
  input.origin_ = path;
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::unexpected(Error{"import", fmt::format("cannot open {}", path), errno});
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return std::unexpected(Error::Sys("stat " + path));
  if (S_ISDIR(st.st_mode)) {
    input.dir_ = std::move(fd);
    return input;
  }
  input.from_tar_ = true;
  input.dir_.Reset(dup(staging_fd));
  SMOLBOX_TRY(input.UnpackTar(fd.get(), max_bytes, max_entries, files));
  return input;
}

Expected<void> ImageInput::UnpackTar(int tar_fd, int64_t max_bytes, int64_t max_entries, Files files) {
  std::unique_ptr<archive, int (*)(archive*)> reader(archive_read_new(), archive_read_free);
  archive_read_support_format_tar(reader.get());
  archive_read_support_filter_gzip(reader.get());
  archive_read_support_filter_zstd(reader.get());
  if (archive_read_open_fd(reader.get(), tar_fd, 1 << 16) != ARCHIVE_OK) {
    return std::unexpected(Error{"import", fmt::format("{} is neither a directory nor a tar: {}", origin_,
                                                       ArchiveError(reader.get())), 0});
  }
  archive_entry* entry = nullptr;
  int64_t entries = 0, bytes = 0;
  int rc;
  while ((rc = archive_read_next_header(reader.get(), &entry)) == ARCHIVE_OK || rc == ARCHIVE_WARN) {
    if (++entries > max_entries) return std::unexpected(Error{"import", fmt::format("{} holds more than {} entries", origin_, max_entries), 0});
    const char* raw = archive_entry_pathname(entry);
    auto parts = SplitEntryPath(raw ? raw : "", origin_);
    if (!parts) return std::unexpected(parts.error());
    if (parts->empty()) continue;  // the tar's root directory
    std::string name = JoinPath(*parts, parts->size());
    if (const char* target = archive_entry_hardlink(entry)) {
      links_[name] = LinkedEntry(*parts, target, false);
      continue;
    }
    mode_t type = archive_entry_filetype(entry);
    if (type == AE_IFLNK) {
      const char* target = archive_entry_symlink(entry);
      links_[name] = LinkedEntry(*parts, target ? target : "", true);
      continue;
    }
    if (type != AE_IFREG) continue;
    // The next header skips the data: by seeking, in a plain tar.
    if (files == Files::kSmallOnly && archive_entry_size(entry) > static_cast<la_int64_t>(kMaxManifestBytes)) {
      skipped_.insert(name);
      continue;
    }
    std::string file = std::to_string(files_.size());
    UniqueFd out(openat(dir_.get(), file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!out.valid()) return std::unexpected(Error::Sys("import: create a staging file"));
    const void* block = nullptr;
    size_t length = 0;
    la_int64_t offset = 0;
    while ((rc = archive_read_data_block(reader.get(), &block, &length, &offset)) == ARCHIVE_OK) {
      bytes += static_cast<int64_t>(length);
      if (bytes > max_bytes) return std::unexpected(Error{"import", fmt::format("{} unpacks to more than {} bytes", origin_, max_bytes), 0});
      for (size_t done = 0; done < length;) {
        ssize_t n = pwrite(out.get(), static_cast<const char*>(block) + done, length - done, offset + done);
        if (n < 0) return std::unexpected(Error::Sys("import: write a staging file"));
        done += static_cast<size_t>(n);
      }
    }
    if (rc != ARCHIVE_EOF) return std::unexpected(Error{"import", fmt::format("reading {:?} of {}: {}", name, origin_, ArchiveError(reader.get())), 0});
    if (ftruncate(out.get(), archive_entry_size(entry)) != 0) return std::unexpected(Error::Sys("import: truncate a staging file"));
    files_[name] = file;
  }
  if (rc != ARCHIVE_EOF) {
    return std::unexpected(Error{"import", fmt::format("{} is not a readable tar: {}", origin_, ArchiveError(reader.get())), 0});
  }
  return {};
}

std::string ImageInput::Resolve(const std::string& name) const {
  std::string current = name;
  for (int hop = 0; hop < kMaxLinkHops; ++hop) {
    auto link = links_.find(current);
    if (link == links_.end()) return current;
    current = link->second;
  }
  return "";
}

bool ImageInput::Has(const std::string& name) const {
  if (from_tar_) return files_.contains(Resolve(name)) || skipped_.contains(Resolve(name));
  struct stat st {};
  UniqueFd fd(OpenBeneath(dir_.get(), name, O_PATH));
  return fd.valid() && fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode);
}

Expected<UniqueFd> ImageInput::OpenFile(const std::string& name) const {
  auto missing = [&] {
    return Error{"import", fmt::format("{} names {:?}, which it does not hold (as a regular file)", origin_, name), 0};
  };
  auto parts = SplitEntryPath(name, origin_);
  if (!parts) return std::unexpected(parts.error());
  if (parts->empty()) return std::unexpected(missing());
  std::string path = JoinPath(*parts, parts->size());
  UniqueFd fd;
  if (from_tar_) {
    auto file = files_.find(Resolve(path));
    if (file == files_.end() && skipped_.contains(Resolve(path))) {
      return std::unexpected(Error{"import", fmt::format("{:?} of {} was not read: the tar was read for its small files only", name, origin_), 0});
    }
    if (file == files_.end()) return std::unexpected(missing());
    fd.Reset(openat(dir_.get(), file->second.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  } else {
    fd.Reset(OpenBeneath(dir_.get(), path, O_RDONLY));
  }
  struct stat st {};
  if (!fd.valid() || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::unexpected(missing());
  return fd;
}

Expected<std::string> ImageInput::ReadSmall(const std::string& name, size_t max_bytes) const {
  SMOLBOX_ASSIGN_OR_RETURN(auto fd, OpenFile(name));
  return ReadBounded(fd.get(), max_bytes, fmt::format("{} in {}", name, origin_));
}

}  // namespace smolbox::image
