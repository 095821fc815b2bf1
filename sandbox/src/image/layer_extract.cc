#include "layer_extract.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <memory>
#include <set>

#include "archive_error.h"
#include "beneath.h"
#include "mutant.h"
#include "unique_fd.h"

namespace smolbox::image {
namespace {

constexpr std::string_view kWhiteout = ".wh.";
constexpr std::string_view kOpaque = ".wh..wh..opq";
constexpr mode_t kKeptBits = 0777 | S_ISVTX;  // never setuid or setgid

// With the strip off (mutant.h) the setuid and setgid bits are kept as the image gives them.
mode_t KeptBits() { return SMOLBOX_PROTECTED("image_setid_strip") ? kKeptBits : 07777; }

using ArchivePtr = std::unique_ptr<archive, int (*)(archive*)>;

// What a layer did that the user should hear of, once per kind, with the first path.
struct Dropped {
  int64_t specials = 0, setid = 0;
  std::string first_special, first_setid;
};

class LayerWriter {
 public:
  LayerWriter(archive* reader, int root, const std::string& what, LayerBudget& budget)
      : reader_(reader), root_(root), what_(what), budget_(budget) {}

  Expected<void> Apply(archive_entry* entry);
  const Dropped& dropped() const { return dropped_; }

 private:
  Expected<void> Whiteout(int parent, const std::vector<std::string>& parts, const std::string& name);
  Expected<void> Replace(int parent, const std::string& name, bool keep_directory);
  Expected<void> WriteFile(int parent, const std::string& name, const std::string& path, archive_entry* entry);
  Expected<void> Hardlink(int parent, const std::string& name, const std::string& path, const char* target);
  Error Refuse(const std::string& path, const std::string& why) const {
    return Error{what_, fmt::format("entry {:?} {}; refusing the image", path, why), 0};
  }

  archive* reader_;
  int root_;
  const std::string& what_;
  LayerBudget& budget_;
  Dropped dropped_;
  std::set<std::string> added_;  // paths this layer made: an opaque whiteout keeps them
};

Expected<void> LayerWriter::Apply(archive_entry* entry) {
  const char* raw = archive_entry_pathname(entry);
  if (raw == nullptr) return std::unexpected(Error{what_, "an entry has no path; refusing the image", 0});
  SMOLBOX_ASSIGN_OR_RETURN(auto parts, SplitEntryPath(raw, what_));
  // The root itself ("./"): the store keeps its own, 0755.
  if (parts.empty()) return {};
  const std::string path = JoinPath(parts, parts.size());
  const std::string name = parts.back();
  if (--budget_.files_left < 0) return std::unexpected(Refuse(path, "is over the image's file count limit"));
  SMOLBOX_ASSIGN_OR_RETURN(auto parent, OpenDirBeneath(root_, parts, parts.size() - 1, true, what_));
  if (name.starts_with(kWhiteout)) return Whiteout(parent.get(), parts, name);
  for (size_t i = 1; i <= parts.size(); ++i) added_.insert(JoinPath(parts, i));
  if (const char* target = archive_entry_hardlink(entry)) return Hardlink(parent.get(), name, path, target);

  mode_t mode = archive_entry_mode(entry);
  mode_t type = mode & S_IFMT;
  if ((mode & (S_ISUID | S_ISGID)) && (type == S_IFREG || type == S_IFDIR)) {
    if (dropped_.setid++ == 0) dropped_.first_setid = path;
  }
  switch (type) {
    case S_IFDIR: {
      SMOLBOX_TRY(Replace(parent.get(), name, true));
      if (mkdirat(parent.get(), name.c_str(), 0700) != 0 && errno != EEXIST) {
        return std::unexpected(Error::Sys(fmt::format("{}: mkdir {}", what_, path)));
      }
      UniqueFd dir(OpenBeneath(parent.get(), name, O_RDONLY | O_DIRECTORY));
      if (!dir.valid()) return std::unexpected(Error::Sys(fmt::format("{}: open {}", what_, path)));
      // The owner keeps rwx so that later layers can write in and removal can empty it.
      if (fchmod(dir.get(), (mode & KeptBits()) | 0700) != 0) return std::unexpected(Error::Sys("chmod " + path));
      return {};
    }
    case S_IFREG:
      SMOLBOX_TRY(Replace(parent.get(), name, false));
      return WriteFile(parent.get(), name, path, entry);
    case S_IFLNK: {
      const char* target = archive_entry_symlink(entry);
      if (target == nullptr || *target == '\0') return std::unexpected(Refuse(path, "is a symlink to nothing"));
      if (std::string_view(target).size() > kMaxEntryPath) return std::unexpected(Refuse(path, "links to a path over 4096 bytes"));
      SMOLBOX_TRY(Replace(parent.get(), name, false));
      // The target is kept as written: it is resolved only inside the sandbox, against the
      // image's root. The extraction never follows it (see OpenBeneath).
      if (symlinkat(target, parent.get(), name.c_str()) != 0) return std::unexpected(Error::Sys(fmt::format("{}: symlink {}", what_, path)));
      return {};
    }
    default:
      if (!SMOLBOX_PROTECTED("image_special_files")) {
        // The mutant makes the device node, FIFO or socket as the image gives it.
        SMOLBOX_TRY(Replace(parent.get(), name, false));
        if (mknodat(parent.get(), name.c_str(), mode, archive_entry_rdev(entry)) != 0) {
          return std::unexpected(Error::Sys(fmt::format("{}: mknod {}", what_, path)));
        }
        return {};
      }
      added_.erase(path);
      if (dropped_.specials++ == 0) dropped_.first_special = path;
      return {};
  }
}

// ".wh.NAME" deletes NAME from the layers below; ".wh..wh..opq" empties its directory of them.
Expected<void> LayerWriter::Whiteout(int parent, const std::vector<std::string>& parts, const std::string& name) {
  std::string dir = JoinPath(parts, parts.size() - 1);
  if (name == kOpaque) {
    std::string prefix = dir.empty() ? "" : dir + "/";
    return RemoveChildren(parent, [&](const std::string& child) { return added_.contains(prefix + child); });
  }
  std::string victim = name.substr(kWhiteout.size());
  if (victim.empty() || victim == "." || victim == ".." || victim.starts_with(kWhiteout)) {
    return std::unexpected(Refuse(JoinPath(parts, parts.size()), "is a whiteout that names no entry of its directory"));
  }
  return RemoveTree(parent, victim);
}

// Clears the way for an entry: what a lower layer (or an earlier entry) left under this name
// goes, except a directory that a directory replaces, which only takes the new mode.
Expected<void> LayerWriter::Replace(int parent, const std::string& name, bool keep_directory) {
  struct stat st {};
  if (fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return {};
  if (keep_directory && S_ISDIR(st.st_mode)) return {};
  return RemoveTree(parent, name);
}

Expected<void> LayerWriter::WriteFile(int parent, const std::string& name, const std::string& path,
                                      archive_entry* entry) {
  int64_t size = archive_entry_size_is_set(entry) ? archive_entry_size(entry) : 0;
  if (size > budget_.bytes_left) return std::unexpected(Refuse(path, "is over the image's size limit"));
  UniqueFd out(openat(parent, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out.valid()) return std::unexpected(Error::Sys(fmt::format("{}: create {}", what_, path)));
  const void* block = nullptr;
  size_t length = 0;
  la_int64_t offset = 0;
  int64_t end = 0;
  int rc;
  while ((rc = archive_read_data_block(reader_, &block, &length, &offset)) == ARCHIVE_OK) {
    // Sparse files arrive as blocks at offsets; the holes stay holes.
    if (offset < 0 || static_cast<int64_t>(offset + length) > budget_.bytes_left) {
      return std::unexpected(Refuse(path, "is over the image's size limit"));
    }
    for (size_t done = 0; done < length;) {
      ssize_t n = pwrite(out.get(), static_cast<const char*>(block) + done, length - done, offset + done);
      if (n < 0) return std::unexpected(Error::Sys(fmt::format("{}: write {}", what_, path)));
      done += static_cast<size_t>(n);
    }
    end = std::max<int64_t>(end, offset + static_cast<int64_t>(length));
  }
  if (rc != ARCHIVE_EOF) {
    return std::unexpected(Error{what_, fmt::format("reading {:?}: {}", path, ArchiveError(reader_)), 0});
  }
  end = std::max(end, size);
  if (ftruncate(out.get(), end) != 0) return std::unexpected(Error::Sys(fmt::format("{}: truncate {}", what_, path)));
  budget_.bytes_left -= end;
  mode_t mode = archive_entry_mode(entry) & KeptBits();
  if (fchmod(out.get(), mode) != 0) return std::unexpected(Error::Sys("chmod " + path));
  timespec times[2] = {{archive_entry_mtime(entry), 0}, {archive_entry_mtime(entry), 0}};
  futimens(out.get(), times);
  return {};
}

// A hardlink names another entry of the tree by its archive path: it must be a regular file
// already there, reached without a symlink.
Expected<void> LayerWriter::Hardlink(int parent, const std::string& name, const std::string& path,
                                     const char* target) {
  if (!SMOLBOX_PROTECTED("image_hardlink_check")) {
    // The mutant links whatever the target names, from the image's root: an absolute target is
    // the host's file.
    SMOLBOX_TRY(Replace(parent, name, false));
    if (linkat(root_, target, parent, name.c_str(), 0) != 0) return std::unexpected(Error::Sys(fmt::format("{}: link {}", what_, path)));
    return {};
  }
  auto target_parts = SplitEntryPath(target, what_);
  if (!target_parts || target_parts->empty()) return std::unexpected(Refuse(path, fmt::format("is a hardlink to {:?}, outside the image", target)));
  auto target_dir = OpenDirBeneath(root_, *target_parts, target_parts->size() - 1, false, what_);
  if (!target_dir) return std::unexpected(Refuse(path, fmt::format("is a hardlink to {:?}, which the image does not hold", target)));
  struct stat st {};
  const std::string& target_name = target_parts->back();
  if (fstatat(target_dir->get(), target_name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
    return std::unexpected(Refuse(path, fmt::format("is a hardlink to {:?}, which is not a regular file of the image", target)));
  }
  SMOLBOX_TRY(Replace(parent, name, false));
  if (linkat(target_dir->get(), target_name.c_str(), parent, name.c_str(), 0) != 0) {
    return std::unexpected(Error::Sys(fmt::format("{}: link {}", what_, path)));
  }
  return {};
}

void Warn(const Dropped& dropped, const std::string& what, std::vector<std::string>& warnings) {
  if (dropped.specials) {
    warnings.push_back(fmt::format("{}: dropped {} device node(s), FIFO(s) or socket(s), the first {:?}",
                                   what, dropped.specials, dropped.first_special));
  }
  if (dropped.setid) {
    warnings.push_back(fmt::format("{}: stripped the setuid or setgid bit of {} file(s), the first {:?}",
                                   what, dropped.setid, dropped.first_setid));
  }
}

}  // namespace

Expected<void> ApplyLayer(int blob_fd, int root_fd, const std::string& what, LayerBudget& budget,
                          std::vector<std::string>& warnings) {
  ArchivePtr reader(archive_read_new(), archive_read_free);
  if (!reader) return std::unexpected(Error{what, "libarchive: out of memory", ENOMEM});
  // Only what the OCI spec names for layers: tar, plain or through gzip or zstd.
  archive_read_support_format_tar(reader.get());
  archive_read_support_filter_gzip(reader.get());
  archive_read_support_filter_zstd(reader.get());
  if (lseek(blob_fd, 0, SEEK_SET) != 0) return std::unexpected(Error::Sys(what + ": seek"));
  if (archive_read_open_fd(reader.get(), blob_fd, 1 << 16) != ARCHIVE_OK) {
    return std::unexpected(Error{what, fmt::format("not a tar: {}", ArchiveError(reader.get())), 0});
  }
  LayerWriter writer(reader.get(), root_fd, what, budget);
  archive_entry* entry = nullptr;
  int rc;
  while ((rc = archive_read_next_header(reader.get(), &entry)) == ARCHIVE_OK || rc == ARCHIVE_WARN) {
    SMOLBOX_TRY(writer.Apply(entry));
  }
  if (rc != ARCHIVE_EOF) {
    return std::unexpected(Error{what, fmt::format("not a readable tar: {}", ArchiveError(reader.get())), 0});
  }
  Warn(writer.dropped(), what, warnings);
  return {};
}

}  // namespace smolbox::image
