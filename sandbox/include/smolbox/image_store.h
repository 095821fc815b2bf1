// The local image store: images imported from `docker save` tars and OCI layouts, kept by
// the digest of their config (the image ID), their layers deduplicated by digest. Nothing is
// ever pulled.
//
//   SMOLBOX_ASSIGN_OR_RETURN(auto store, smolbox::image::ImageStore::Open());
//   SMOLBOX_ASSIGN_OR_RETURN(auto imported, store.Import("app.tar", {.name = "app:1"}));
//   SMOLBOX_ASSIGN_OR_RETURN(auto image, store.Find("app:1"));
//   std::string root = store.RootfsOf(image);  // the sandbox's read-only root
//
// Layout, under the store root (/var/lib/smolbox/images for root, else
// $XDG_DATA_HOME/smolbox/images; SMOLBOX_IMAGE_STORE overrides both):
//   tags.json            {"name:tag": "sha256:<id>"}
//   blobs/sha256/<hex>   each layer once, as imported (its digest checked)
//   images/<id>/         image.json (config, layers, size) and rootfs/, the unpacked tree
//   tmp/                 imports in progress; swept when no import runs
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "smolbox/error.h"

namespace smolbox::image {

// What docker honours of an image's config.
struct ImageConfig {
  std::vector<std::string> env;  // "KEY=VALUE"
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  std::string working_dir;
  std::string user;  // "", "NAME", "UID", "UID:GID" or "NAME:GROUP"
};

struct ImageInfo {
  std::string id;  // "sha256:<hex>", the config's digest
  std::vector<std::string> names;  // "name:tag"
  int64_t size_bytes = 0;  // of the unpacked tree
  std::string created;  // as the config says, RFC 3339
  std::vector<std::string> layers;  // digests, bottom first
  ImageConfig config;
};

struct ImportOptions {
  // One image of several, or the name to give the only one.
  std::optional<std::string> name;
  // All layers of one image together, and a tar's own unpacking: the decompression bomb's bound.
  int64_t max_bytes = 16LL << 30;
  int64_t max_files = 1 << 20;
};

struct ImportResult {
  std::vector<ImageInfo> images;
  std::vector<std::string> warnings;  // dropped device nodes, stripped setuid bits
};

// The store root for this user, before any override; see the layout above.
Expected<std::string> DefaultStoreRoot();

// "host", a path (it starts with "/" or "."), or else a reference into the store.
bool IsStoreReference(const std::string& image);
// "name" -> "name:latest"; an invalid name or tag is an error naming `field`.
Expected<std::string> NormalizeReference(const std::string& reference, const std::string& field);

class ImageStore {
 public:
  static Expected<ImageStore> Open(std::string root = "");

  Expected<ImportResult> Import(const std::string& source, const ImportOptions& options);
  Expected<std::vector<ImageInfo>> List() const;
  // A name[:tag] untags (and deletes the image once no tag is left); an ID deletes the image
  // and its tags. Layers no other image holds are freed. Returns what was done, a line each.
  Expected<std::vector<std::string>> Remove(const std::string& reference);
  // By name[:tag], or by ID ("sha256:<hex>", or 12 or more of its hex digits).
  Expected<ImageInfo> Find(const std::string& reference) const;

  std::string RootfsOf(const ImageInfo& image) const;
  const std::string& root() const { return root_; }

 private:
  explicit ImageStore(std::string root) : root_(std::move(root)) {}
  std::string root_;
};

}  // namespace smolbox::image

namespace smolbox::image {

// A microVM's read-only disk for the store image whose tree is rootfs: one erofs file, made
// with mkfs.erofs on first use and kept beside the tree (images/<id>/rootfs.erofs), so that the
// boot snapshot, keyed by the disk, is made once per image. Nothing when rootfs is not the tree
// of an image in the default store.
Expected<std::optional<std::string>> ErofsOfStoreImage(const std::string& rootfs);
// An erofs disk of tree at out (0644, for QEMU's uid), with the owners the tree has: an OCI
// engine's rootfs, whose ids are the container's.
Expected<void> MakeErofsDisk(const std::string& out, const std::string& tree);

}  // namespace smolbox::image
