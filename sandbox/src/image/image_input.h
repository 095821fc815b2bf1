// What `smolbox image import` reads: a directory (an OCI layout) or a tar of one, or a
// `docker save` tar, plain or gzipped. A tar's regular files are unpacked into a staging
// directory first, since a docker save tar puts its manifest last; links inside the tar are
// followed only to other entries of the same tar, by name. A directory is read beneath itself,
// never through a symlink.
//
// A tar can first be read for its small files only (manifests and configs, up to
// kMaxManifestBytes each), its layers skipped: an import of images the store already holds
// needs nothing more, and reads a plain tar's layers not at all.
//
//   SMOLBOX_ASSIGN_OR_RETURN(auto input, ImageInput::Open("/tmp/app.tar", staging_fd, limits));
//   if (input.Has("index.json")) { auto text = input.ReadSmall("index.json", 4 << 20); ... }
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::image {

class ImageInput {
 public:
  // staging_fd: an empty directory of the store's, for a tar's files; max_bytes and
  // max_entries bound what a tar may unpack there.
  enum class Files { kAll, kSmallOnly };
  static Expected<ImageInput> Open(const std::string& path, int staging_fd, int64_t max_bytes,
                                   int64_t max_entries, Files files = Files::kAll);

  // Whether every file is there: false for a tar read with kSmallOnly that had larger ones.
  bool complete() const { return skipped_.empty(); }
  bool Has(const std::string& name) const;
  // A regular file of the input, by its path inside it ("blobs/sha256/ab..", "manifest.json").
  Expected<UniqueFd> OpenFile(const std::string& name) const;
  // A whole small file (a manifest, a config): larger than max_bytes is an error.
  Expected<std::string> ReadSmall(const std::string& name, size_t max_bytes) const;
  const std::string& origin() const { return origin_; }

 private:
  Expected<void> UnpackTar(int tar_fd, int64_t max_bytes, int64_t max_entries, Files files);
  std::string Resolve(const std::string& name) const;

  std::string origin_;
  UniqueFd dir_;  // the layout directory, or the staging directory of a tar's files
  bool from_tar_ = false;
  std::map<std::string, std::string> files_;  // a tar's entry path -> its file in dir_
  std::map<std::string, std::string> links_;  // a tar's link path -> the entry path it names
  std::set<std::string> skipped_;              // a tar's files left unread (kSmallOnly)
};

}  // namespace smolbox::image
