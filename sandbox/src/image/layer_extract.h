// One image layer, a tar (gzip, zstd or plain) from whoever built the image, applied onto the
// tree the layers below it made, with OCI whiteouts. A hostile entry refuses the whole image;
// the caller removes the half-made tree.
//
//   LayerBudget budget{.bytes_left = 8LL << 30, .files_left = 500000};
//   std::vector<std::string> warnings;
//   SMOLBOX_TRY(ApplyLayer(blob_fd, rootfs_fd, "layer 2 (sha256:ab12...)", budget, warnings));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "smolbox/error.h"

namespace smolbox::image {

// What the layers of one image may still add, all layers together: the decompression bomb's
// bound.
struct LayerBudget {
  int64_t bytes_left = 0;
  int64_t files_left = 0;
};

// Applies the layer read from blob_fd onto the directory root_fd. Refused, naming `what` and
// the entry: paths that are absolute, climb with "..", or pass through a symlink or a file;
// hardlinks to what is not a regular file of the tree; whiteouts that name no child; the budget
// overrun. Dropped, with a warning: device nodes, FIFOs and sockets. Stripped, with a warning:
// setuid and setgid bits. Files are owned by whoever imports.
Expected<void> ApplyLayer(int blob_fd, int root_fd, const std::string& what, LayerBudget& budget,
                          std::vector<std::string>& warnings);

}  // namespace smolbox::image
