// An image's config blob, as docker reads it, and our own record of an imported image.
#pragma once

#include <nlohmann/json.hpp>

#include "smolbox/error.h"
#include "smolbox/image_store.h"

namespace smolbox::image {

// The config's Env, Entrypoint, Cmd, WorkingDir and User, and its created time. A field of the
// wrong type is an error naming it; a missing one is empty, as docker takes it.
Expected<ImageInfo> ParseImageConfig(const nlohmann::json& config, const std::string& what);

nlohmann::json RecordToJson(const ImageInfo& image);
Expected<ImageInfo> RecordFromJson(const nlohmann::json& record, const std::string& what);

}  // namespace smolbox::image
