// The images an import input holds, read from its OCI index (index.json, with oci-layout) or
// its docker save manifest (manifest.json): for each, its names, its config and its layers in
// order, each with the digest its bytes must have. Every manifest and index read on the way
// has its own digest checked; the config and layers are checked as they are copied in.
//
//   SMOLBOX_ASSIGN_OR_RETURN(auto images, ReadImageList(input));
//   for (const ImageEntry& image : images) fmt::print("{} {}\n", image.config.digest, image.names.size());
#pragma once

#include <string>
#include <vector>

#include "image_input.h"
#include "smolbox/error.h"

namespace smolbox::image {

// A file of the input and the digest its bytes must have.
struct BlobRef {
  std::string path;
  std::string digest;
};

struct ImageEntry {
  std::vector<std::string> names;  // "name:tag", as the input gives them; may be empty
  BlobRef config;
  std::vector<BlobRef> layers;  // bottom first
};

inline constexpr size_t kMaxManifestBytes = 4 << 20;

Expected<std::vector<ImageEntry>> ReadImageList(const ImageInput& input);

}  // namespace smolbox::image
