#include "image_config.h"

#include <fmt/format.h>

namespace smolbox::image {
namespace {

using json = nlohmann::json;

Expected<std::vector<std::string>> StringList(const json& object, const char* key, const std::string& what) {
  if (!object.contains(key) || object[key].is_null()) return std::vector<std::string>{};
  const json& value = object[key];
  if (!value.is_array()) return std::unexpected(Error{what, fmt::format("\"{}\" is not a list of strings", key), 0});
  std::vector<std::string> out;
  for (const json& item : value) {
    if (!item.is_string()) return std::unexpected(Error{what, fmt::format("\"{}\" is not a list of strings", key), 0});
    out.push_back(item.get<std::string>());
  }
  return out;
}

Expected<std::string> String(const json& object, const char* key, const std::string& what) {
  if (!object.contains(key) || object[key].is_null()) return std::string();
  if (!object[key].is_string()) return std::unexpected(Error{what, fmt::format("\"{}\" is not a string", key), 0});
  return object[key].get<std::string>();
}

Expected<ImageConfig> ConfigFields(const json& c, const std::string& what) {
  ImageConfig config;
  SMOLBOX_ASSIGN_OR_RETURN(config.env, StringList(c, "Env", what));
  SMOLBOX_ASSIGN_OR_RETURN(config.entrypoint, StringList(c, "Entrypoint", what));
  SMOLBOX_ASSIGN_OR_RETURN(config.cmd, StringList(c, "Cmd", what));
  SMOLBOX_ASSIGN_OR_RETURN(config.working_dir, String(c, "WorkingDir", what));
  SMOLBOX_ASSIGN_OR_RETURN(config.user, String(c, "User", what));
  for (const std::string& entry : config.env) {
    if (entry.find('=') == std::string::npos || entry.starts_with('=')) {
      return std::unexpected(Error{what, fmt::format("Env entry {:?} is not KEY=VALUE", entry), 0});
    }
  }
  return config;
}

}  // namespace

Expected<ImageInfo> ParseImageConfig(const json& doc, const std::string& what) {
  if (!doc.is_object()) return std::unexpected(Error{what, "is not a JSON object", 0});
  ImageInfo image;
  SMOLBOX_ASSIGN_OR_RETURN(image.created, String(doc, "created", what));
  if (doc.contains("config") && !doc["config"].is_null()) {
    if (!doc["config"].is_object()) return std::unexpected(Error{what, "\"config\" is not an object", 0});
    SMOLBOX_ASSIGN_OR_RETURN(image.config, ConfigFields(doc["config"], what));
  }
  return image;
}

json RecordToJson(const ImageInfo& image) {
  return {{"id", image.id},
          {"created", image.created},
          {"size", image.size_bytes},
          {"layers", image.layers},
          {"config",
           {{"Env", image.config.env},
            {"Entrypoint", image.config.entrypoint},
            {"Cmd", image.config.cmd},
            {"WorkingDir", image.config.working_dir},
            {"User", image.config.user}}}};
}

Expected<ImageInfo> RecordFromJson(const json& record, const std::string& what) {
  SMOLBOX_ASSIGN_OR_RETURN(auto image, ParseImageConfig(record, what));
  SMOLBOX_ASSIGN_OR_RETURN(image.id, String(record, "id", what));
  SMOLBOX_ASSIGN_OR_RETURN(image.layers, StringList(record, "layers", what));
  if (!record.contains("size") || !record["size"].is_number_integer()) {
    return std::unexpected(Error{what, "\"size\" is not an integer", 0});
  }
  image.size_bytes = record["size"].get<int64_t>();
  return image;
}

}  // namespace smolbox::image
