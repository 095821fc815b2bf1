// Test images, crafted byte by byte: layer tars written with libarchive (any entry an attacker
// could write, which no real tool would), and OCI layouts or docker save tars around them.
//
//   std::string layer = MakeTar({File("etc/os-release", "ID=test\n"), Symlink("etc/x", "/etc")});
//   OciLayout layout(dir.path() + "/layout");
//   layout.AddImage({layer}, Config({"PATH=/usr/bin"}), "app:1");
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace smolbox::testing {

struct TarEntry {
  std::string path;
  char type = 'f';  // f file, d directory, l symlink, h hardlink, c char device, p FIFO
  std::string data;  // a file's bytes, or a link's target
  mode_t mode = 0644;
};

TarEntry File(std::string path, std::string data, mode_t mode = 0644);
TarEntry Dir(std::string path, mode_t mode = 0755);
TarEntry Symlink(std::string path, std::string target);
TarEntry Hardlink(std::string path, std::string target);
TarEntry Special(std::string path, char type);

enum class Compression { kNone, kGzip, kZstd };
std::string MakeTar(const std::vector<TarEntry>& entries, Compression compression = Compression::kNone);

// An image config as docker writes it.
nlohmann::json Config(const std::vector<std::string>& env = {}, const nlohmann::json& extra = nlohmann::json::object());
std::string Sha256(const std::string& bytes);

// An OCI image layout in a directory: blobs by digest, and index.json naming each image.
class OciLayout {
 public:
  explicit OciLayout(std::string dir);
  std::string AddBlob(const std::string& bytes);  // its digest
  // Each layer as given (compressed or not), with the media type its first bytes tell.
  void AddImage(const std::vector<std::string>& layers, const nlohmann::json& config, const std::string& ref_name);
  // index.json as written so far, to be broken by a test.
  nlohmann::json& index() { return index_; }
  void WriteIndex() const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  nlohmann::json index_;
};

// A docker save tar: <hex>.json configs, <hex>/layer.tar layers, manifest.json last.
std::string DockerSaveTar(const std::vector<std::string>& layers, nlohmann::json config,
                          const std::vector<std::string>& repo_tags);

}  // namespace smolbox::testing
