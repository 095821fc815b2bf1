#include "image_builder.h"

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <fmt/format.h>

#include <memory>
#include <stdexcept>

#include "test_support.h"

namespace smolbox::testing {

TarEntry File(std::string path, std::string data, mode_t mode) { return {std::move(path), 'f', std::move(data), mode}; }
TarEntry Dir(std::string path, mode_t mode) { return {std::move(path), 'd', "", mode}; }
TarEntry Symlink(std::string path, std::string target) { return {std::move(path), 'l', std::move(target), 0777}; }
TarEntry Hardlink(std::string path, std::string target) { return {std::move(path), 'h', std::move(target), 0644}; }
TarEntry Special(std::string path, char type) { return {std::move(path), type, "", 0644}; }

std::string MakeTar(const std::vector<TarEntry>& entries, Compression compression) {
  std::unique_ptr<archive, int (*)(archive*)> writer(archive_write_new(), archive_write_free);
  archive_write_set_format_pax_restricted(writer.get());
  if (compression == Compression::kGzip) archive_write_add_filter_gzip(writer.get());
  if (compression == Compression::kZstd) archive_write_add_filter_zstd(writer.get());
  // Room for every entry's data and headers; compressing incompressible data adds a little.
  size_t room = 1 << 20;
  for (const TarEntry& e : entries) room += e.data.size() + 2048;
  std::string out;
  out.resize(room + room / 64);
  size_t used = 0;
  if (archive_write_open_memory(writer.get(), out.data(), out.size(), &used) != ARCHIVE_OK) {
    throw std::runtime_error(archive_error_string(writer.get()));
  }
  for (const TarEntry& e : entries) {
    std::unique_ptr<archive_entry, void (*)(archive_entry*)> entry(archive_entry_new(), archive_entry_free);
    archive_entry_set_pathname(entry.get(), e.path.c_str());
    archive_entry_set_perm(entry.get(), e.mode);
    archive_entry_set_mtime(entry.get(), 1700000000, 0);
    switch (e.type) {
      case 'f': archive_entry_set_filetype(entry.get(), AE_IFREG); archive_entry_set_size(entry.get(), static_cast<la_int64_t>(e.data.size())); break;
      case 'd': archive_entry_set_filetype(entry.get(), AE_IFDIR); break;
      case 'l': archive_entry_set_filetype(entry.get(), AE_IFLNK); archive_entry_set_symlink(entry.get(), e.data.c_str()); break;
      case 'h': archive_entry_set_filetype(entry.get(), AE_IFREG); archive_entry_set_hardlink(entry.get(), e.data.c_str()); break;
      case 'c': archive_entry_set_filetype(entry.get(), AE_IFCHR); archive_entry_set_rdev(entry.get(), makedev(1, 3)); break;
      case 'p': archive_entry_set_filetype(entry.get(), AE_IFIFO); break;
    }
    if (archive_write_header(writer.get(), entry.get()) != ARCHIVE_OK) throw std::runtime_error(archive_error_string(writer.get()));
    if (e.type == 'f' && !e.data.empty()) archive_write_data(writer.get(), e.data.data(), e.data.size());
  }
  archive_write_close(writer.get());
  out.resize(used);
  return out;
}

nlohmann::json Config(const std::vector<std::string>& env, const nlohmann::json& extra) {
  nlohmann::json config = {{"architecture", "amd64"}, {"os", "linux"}, {"created", "2026-01-02T03:04:05Z"},
                           {"config", {{"Env", env}}}, {"rootfs", {{"type", "layers"}, {"diff_ids", nlohmann::json::array()}}}};
  for (const auto& [key, value] : extra.items()) config["config"][key] = value;
  return config;
}

std::string Sha256(const std::string& bytes) {
  unsigned char sum[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(bytes.data(), bytes.size(), sum, &size, EVP_sha256(), nullptr);
  std::string out = "sha256:";
  for (unsigned int i = 0; i < size; ++i) out += fmt::format("{:02x}", sum[i]);
  return out;
}

OciLayout::OciLayout(std::string dir) : dir_(std::move(dir)), index_({{"schemaVersion", 2}, {"manifests", nlohmann::json::array()}}) {
  WriteFile(dir_ + "/oci-layout", R"({"imageLayoutVersion": "1.0.0"})");
  WriteIndex();
}

std::string OciLayout::AddBlob(const std::string& bytes) {
  std::string digest = Sha256(bytes);
  WriteFile(dir_ + "/blobs/sha256/" + digest.substr(7), bytes);
  return digest;
}

void OciLayout::AddImage(const std::vector<std::string>& layers, const nlohmann::json& config_in, const std::string& ref_name) {
  nlohmann::json config = config_in;
  nlohmann::json descriptors = nlohmann::json::array();
  for (const std::string& layer : layers) {
    bool gzip = layer.size() > 2 && static_cast<unsigned char>(layer[0]) == 0x1f && static_cast<unsigned char>(layer[1]) == 0x8b;
    bool zstd = layer.size() > 4 && layer.compare(0, 4, "\x28\xb5\x2f\xfd") == 0;
    std::string type = std::string("application/vnd.oci.image.layer.v1.tar") + (gzip ? "+gzip" : zstd ? "+zstd" : "");
    descriptors.push_back({{"mediaType", type}, {"digest", AddBlob(layer)}, {"size", layer.size()}});
    config["rootfs"]["diff_ids"].push_back(Sha256(layer));
  }
  std::string config_text = config.dump();
  nlohmann::json manifest = {{"schemaVersion", 2},
                             {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                             {"config", {{"mediaType", "application/vnd.oci.image.config.v1+json"}, {"digest", AddBlob(config_text)}, {"size", config_text.size()}}},
                             {"layers", descriptors}};
  std::string manifest_text = manifest.dump();
  nlohmann::json entry = {{"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                          {"digest", AddBlob(manifest_text)},
                          {"size", manifest_text.size()}};
  if (!ref_name.empty()) entry["annotations"] = {{"org.opencontainers.image.ref.name", ref_name}};
  index_["manifests"].push_back(entry);
  WriteIndex();
}

void OciLayout::WriteIndex() const { WriteFile(dir_ + "/index.json", index_.dump()); }

std::string DockerSaveTar(const std::vector<std::string>& layers, nlohmann::json config,
                          const std::vector<std::string>& repo_tags) {
  std::vector<TarEntry> entries;
  nlohmann::json layer_paths = nlohmann::json::array();
  for (const std::string& layer : layers) {
    std::string hex = Sha256(layer).substr(7);
    // A layer the image holds twice is stored once, and linked, as docker save does.
    std::string path = hex + "/layer.tar";
    bool repeated = false;
    for (const auto& seen : layer_paths) repeated |= seen == path;
    if (repeated) {
      std::string alias = fmt::format("{:064d}/layer.tar", layer_paths.size());
      entries.push_back(Symlink(alias, "../" + path));
      path = alias;
    } else {
      entries.push_back(File(path, layer));
    }
    layer_paths.push_back(path);
    config["rootfs"]["diff_ids"].push_back("sha256:" + hex);
  }
  std::string config_text = config.dump();
  std::string config_path = Sha256(config_text).substr(7) + ".json";
  entries.push_back(File(config_path, config_text));
  nlohmann::json manifest = nlohmann::json::array({{{"Config", config_path}, {"RepoTags", repo_tags}, {"Layers", layer_paths}}});
  entries.push_back(File("manifest.json", manifest.dump()));
  return MakeTar(entries);
}

}  // namespace smolbox::testing
