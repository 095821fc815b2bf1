#include "image_manifest.h"

#include <fmt/format.h>

#include "digest.h"
#include "json_bounds.h"

namespace smolbox::image {
namespace {

using json = nlohmann::json;

constexpr int kMaxIndexDepth = 4;
constexpr size_t kMaxLayers = 256;

const char* const kIndexTypes[] = {"application/vnd.oci.image.index.v1+json",
                                   "application/vnd.docker.distribution.manifest.list.v2+json"};
const char* const kLayerTypes[] = {"application/vnd.oci.image.layer.v1.tar",
                                   "application/vnd.oci.image.layer.v1.tar+gzip",
                                   "application/vnd.oci.image.layer.v1.tar+zstd",
                                   "application/vnd.docker.image.rootfs.diff.tar",
                                   "application/vnd.docker.image.rootfs.diff.tar.gzip"};

template <size_t N>
bool OneOf(const std::string& value, const char* const (&options)[N]) {
  for (const char* option : options) {
    if (value == option) return true;
  }
  return false;
}

Error Bad(const ImageInput& input, const std::string& file, const std::string& why) {
  return Error{"import", fmt::format("{} of {}: {}; refusing it", file, input.origin(), why), 0};
}

// A JSON document of the input, within the bounds every document of ours has.
Expected<json> ReadJson(const ImageInput& input, const std::string& name, const std::string& digest = "") {
  SMOLBOX_ASSIGN_OR_RETURN(auto text, input.ReadSmall(name, kMaxManifestBytes));
  if (!digest.empty() && Sha256Of(text) != digest) {
    return std::unexpected(Bad(input, name, fmt::format("its content does not match its digest {}", digest)));
  }
  return ParseBoundedJson(text, {.max_bytes = kMaxManifestBytes}, fmt::format("{} of {}", name, input.origin()));
}

Expected<std::string> StringField(const ImageInput& input, const std::string& file, const json& object,
                                  const char* key) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_string()) {
    return std::unexpected(Bad(input, file, fmt::format("\"{}\" is missing or not a string", key)));
  }
  return object[key].get<std::string>();
}

// A descriptor's digest, as a blob path of the layout.
Expected<BlobRef> Descriptor(const ImageInput& input, const std::string& file, const json& descriptor) {
  SMOLBOX_ASSIGN_OR_RETURN(auto digest, StringField(input, file, descriptor, "digest"));
  if (!IsSha256Digest(digest)) return std::unexpected(Bad(input, file, fmt::format("digest {:?} is not sha256:<64 hex digits>", digest)));
  return BlobRef{"blobs/sha256/" + DigestHex(digest), digest};
}

// The names an index entry gives its image: the full reference when the tool wrote one.
std::vector<std::string> AnnotatedNames(const json& descriptor) {
  const json* annotations = descriptor.is_object() && descriptor.contains("annotations") ? &descriptor["annotations"] : nullptr;
  if (annotations == nullptr || !annotations->is_object()) return {};
  for (const char* key : {"io.containerd.image.name", "org.opencontainers.image.ref.name"}) {
    if (annotations->contains(key) && (*annotations)[key].is_string()) return {(*annotations)[key].get<std::string>()};
  }
  return {};
}

// linux/amd64, or no platform said: the only images this host runs.
bool RunsHere(const json& descriptor) {
  if (!descriptor.contains("platform") || !descriptor["platform"].is_object()) return true;
  const json& platform = descriptor["platform"];
  return platform.value("os", "linux") == "linux" && platform.value("architecture", "amd64") == "amd64";
}

Expected<ImageEntry> ReadOciManifest(const ImageInput& input, const BlobRef& blob) {
  SMOLBOX_ASSIGN_OR_RETURN(auto manifest, ReadJson(input, blob.path, blob.digest));
  ImageEntry image;
  if (!manifest.is_object() || !manifest.contains("config")) return std::unexpected(Bad(input, blob.path, "\"config\" is missing"));
  SMOLBOX_ASSIGN_OR_RETURN(image.config, Descriptor(input, blob.path, manifest["config"]));
  if (!manifest.contains("layers") || !manifest["layers"].is_array()) return std::unexpected(Bad(input, blob.path, "\"layers\" is missing or not a list"));
  if (manifest["layers"].size() > kMaxLayers) return std::unexpected(Bad(input, blob.path, fmt::format("more than {} layers", kMaxLayers)));
  for (const json& layer : manifest["layers"]) {
    SMOLBOX_ASSIGN_OR_RETURN(auto type, StringField(input, blob.path, layer, "mediaType"));
    if (!OneOf(type, kLayerTypes)) return std::unexpected(Bad(input, blob.path, fmt::format("layer media type {:?} is not a tar, gzip or zstd layer", type)));
    SMOLBOX_ASSIGN_OR_RETURN(auto ref, Descriptor(input, blob.path, layer));
    image.layers.push_back(std::move(ref));
  }
  return image;
}

Expected<void> ReadOciIndex(const ImageInput& input, const BlobRef& index_blob, int depth,
                            std::vector<ImageEntry>& images) {
  if (depth > kMaxIndexDepth) return std::unexpected(Bad(input, index_blob.path, "indexes nest too deep"));
  SMOLBOX_ASSIGN_OR_RETURN(auto index, ReadJson(input, index_blob.path, index_blob.digest));
  if (!index.is_object() || !index.contains("manifests") || !index["manifests"].is_array()) {
    return std::unexpected(Bad(input, index_blob.path, "\"manifests\" is missing or not a list"));
  }
  for (const json& descriptor : index["manifests"]) {
    if (!RunsHere(descriptor)) continue;
    SMOLBOX_ASSIGN_OR_RETURN(auto blob, Descriptor(input, index_blob.path, descriptor));
    std::string type = descriptor.is_object() ? StringOr(descriptor, "mediaType", "") : "";
    if (OneOf(type, kIndexTypes)) {
      SMOLBOX_TRY(ReadOciIndex(input, blob, depth + 1, images));
      continue;
    }
    SMOLBOX_ASSIGN_OR_RETURN(auto image, ReadOciManifest(input, blob));
    image.names = AnnotatedNames(descriptor);
    images.push_back(std::move(image));
  }
  return {};
}

// docker save: manifest.json lists each image's config file, its tags and its layer files.
// The config's digest is its file's name; each layer's, the config's rootfs.diff_ids.
Expected<std::vector<ImageEntry>> ReadDockerManifest(const ImageInput& input) {
  SMOLBOX_ASSIGN_OR_RETURN(auto manifest, ReadJson(input, "manifest.json"));
  if (!manifest.is_array()) return std::unexpected(Bad(input, "manifest.json", "is not a list"));
  std::vector<ImageEntry> images;
  for (const json& item : manifest) {
    ImageEntry image;
    SMOLBOX_ASSIGN_OR_RETURN(image.config.path, StringField(input, "manifest.json", item, "Config"));
    std::string file = image.config.path.substr(image.config.path.rfind('/') + 1);
    if (file.ends_with(".json")) file.resize(file.size() - 5);
    image.config.digest = "sha256:" + file;
    if (!IsSha256Digest(image.config.digest)) return std::unexpected(Bad(input, "manifest.json", fmt::format("config {:?} is not named by its digest", image.config.path)));
    SMOLBOX_ASSIGN_OR_RETURN(auto config, ReadJson(input, image.config.path, image.config.digest));
    const json* diff_ids = config.contains("rootfs") && config["rootfs"].is_object() && config["rootfs"].contains("diff_ids") ? &config["rootfs"]["diff_ids"] : nullptr;
    if (!item.contains("Layers") || !item["Layers"].is_array() || diff_ids == nullptr || !diff_ids->is_array() ||
        diff_ids->size() != item["Layers"].size()) {
      return std::unexpected(Bad(input, "manifest.json", "its layers and the config's rootfs.diff_ids do not pair up"));
    }
    if (item["Layers"].size() > kMaxLayers) return std::unexpected(Bad(input, "manifest.json", fmt::format("more than {} layers", kMaxLayers)));
    for (size_t i = 0; i < item["Layers"].size(); ++i) {
      if (!item["Layers"][i].is_string() || !(*diff_ids)[i].is_string() || !IsSha256Digest((*diff_ids)[i].get<std::string>())) {
        return std::unexpected(Bad(input, "manifest.json", fmt::format("layer {} is not a file with a sha256 diff_id", i + 1)));
      }
      image.layers.push_back({item["Layers"][i].get<std::string>(), (*diff_ids)[i].get<std::string>()});
    }
    if (item.contains("RepoTags") && item["RepoTags"].is_array()) {
      for (const json& tag : item["RepoTags"]) {
        if (tag.is_string()) image.names.push_back(tag.get<std::string>());
      }
    }
    images.push_back(std::move(image));
  }
  return images;
}

}  // namespace

Expected<std::vector<ImageEntry>> ReadImageList(const ImageInput& input) {
  std::vector<ImageEntry> images;
  if (input.Has("oci-layout") && input.Has("index.json")) {
    SMOLBOX_ASSIGN_OR_RETURN(auto layout, ReadJson(input, "oci-layout"));
    if (!layout.is_object() || !layout.contains("imageLayoutVersion")) {
      return std::unexpected(Bad(input, "oci-layout", "\"imageLayoutVersion\" is missing"));
    }
    SMOLBOX_TRY(ReadOciIndex(input, {"index.json", ""}, 0, images));
  } else if (input.Has("manifest.json")) {
    SMOLBOX_ASSIGN_OR_RETURN(images, ReadDockerManifest(input));
  } else {
    return std::unexpected(Error{"import", fmt::format("{} is neither an OCI layout (oci-layout and index.json) nor a docker save tar (manifest.json)", input.origin()), 0});
  }
  if (images.empty()) return std::unexpected(Error{"import", fmt::format("{} holds no image for linux/amd64", input.origin()), 0});
  return images;
}

}  // namespace smolbox::image
