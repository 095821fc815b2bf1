#include "image_command.h"

#include <fmt/format.h>

#include <charconv>
#include <nlohmann/json.hpp>

#include "smolbox/image_store.h"
#include "smolbox/units.h"

namespace smolbox::cli {
namespace {

constexpr int kExitError = 125;

int Failed(const Error& error) {
  fmt::print(stderr, "smolbox: {}\n", error.ToString());
  return kExitError;
}

std::string Size(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30)) return fmt::format("{:.1f}GB", bytes / 1e9);
  if (bytes >= (int64_t{1} << 20)) return fmt::format("{:.1f}MB", bytes / 1e6);
  return fmt::format("{:.1f}kB", bytes / 1e3);
}

std::string ShortId(const std::string& id) { return id.substr(7, 12); }

Expected<image::ImportOptions> Options(const ImageFlags& flags) {
  image::ImportOptions options;
  if (!flags.name.empty()) options.name = flags.name;
  if (!flags.max_size.empty()) {
    auto bytes = ParseBytes(flags.max_size);
    if (!bytes || *bytes < 1) return std::unexpected(Error::Field("--max-size", bytes ? "must be at least 1 byte" : bytes.error().what));
    options.max_bytes = *bytes;
  }
  if (!flags.max_files.empty()) {
    int64_t files = 0;
    auto [end, ec] = std::from_chars(flags.max_files.data(), flags.max_files.data() + flags.max_files.size(), files);
    if (ec != std::errc{} || end != flags.max_files.data() + flags.max_files.size() || files < 1) {
      return std::unexpected(Error::Field("--max-files", fmt::format("must be a positive integer (got {:?})", flags.max_files)));
    }
    options.max_files = files;
  }
  return options;
}

int Import(const ImageFlags& flags) {
  auto options = Options(flags);
  if (!options) return Failed(options.error());
  auto store = image::ImageStore::Open();
  if (!store) return Failed(store.error());
  auto result = store->Import(flags.source, *options);
  if (!result) return Failed(result.error());
  for (const std::string& warning : result->warnings) fmt::print(stderr, "smolbox: warning: {}\n", warning);
  for (const image::ImageInfo& image : result->images) {
    std::string names;
    for (const std::string& name : image.names) names += " " + name;
    fmt::print("imported {}{}\n", image.id, names);
  }
  return 0;
}

int List(const ImageFlags& flags) {
  auto store = image::ImageStore::Open();
  if (!store) return Failed(store.error());
  auto images = store->List();
  if (!images) return Failed(images.error());
  if (flags.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& image : *images) {
      out.push_back({{"id", image.id}, {"names", image.names}, {"size", image.size_bytes},
                     {"created", image.created}, {"layers", image.layers}});
    }
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  fmt::print("{:<32} {:<16} {:<12} {:>9}  {}\n", "NAME", "TAG", "ID", "SIZE", "CREATED");
  for (const auto& image : *images) {
    std::vector<std::string> names = image.names;
    if (names.empty()) names.push_back("<none>:<none>");
    for (const std::string& name : names) {
      size_t colon = name.rfind(':');
      fmt::print("{:<32} {:<16} {:<12} {:>9}  {}\n", name.substr(0, colon), name.substr(colon + 1), ShortId(image.id),
                 Size(image.size_bytes), image.created.substr(0, 19));
    }
  }
  return 0;
}

int Remove(const ImageFlags& flags) {
  auto store = image::ImageStore::Open();
  if (!store) return Failed(store.error());
  int status = 0;
  for (const std::string& reference : flags.references) {
    auto done = store->Remove(reference);
    if (!done) {
      status = Failed(done.error());
      continue;
    }
    for (const std::string& line : *done) fmt::print("{}\n", line);
  }
  return status;
}

}  // namespace

CLI::App* AddImageCommand(CLI::App& app, ImageFlags& flags) {
  CLI::App* image = app.add_subcommand("image", "the local image store: import, ls, rm (nothing is ever pulled)");
  image->require_subcommand(1);
  CLI::App* import = image->add_subcommand("import", "import images from a docker save tar or an OCI layout");
  import->add_option("source", flags.source, "a docker save tar (plain or gzipped), an OCI layout directory, or a tar of one")
      ->required()
      ->type_name("FILE|DIR");
  import->add_option("--name", flags.name, "the one image to import of several, or the name to give the only one")
      ->type_name("NAME[:TAG]");
  import->add_option("--max-size", flags.max_size, "the most an image may unpack to, all layers together (default 16G)")
      ->type_name("SIZE");
  import->add_option("--max-files", flags.max_files, "the most entries an image may hold (default 1048576)")
      ->type_name("N");
  import->footer(
      "Every blob's sha256 is checked against its manifest. Entries that climb out of the image, or\n"
      "pass through a symlink, refuse the image; device nodes and FIFOs are dropped and setuid bits\n"
      "stripped, with a warning. A refused import leaves nothing behind.");
  CLI::App* ls = image->add_subcommand("ls", "list imported images: NAME, TAG, ID, SIZE, CREATED");
  ls->add_flag("--json", flags.json, "print them as JSON");
  CLI::App* rm = image->add_subcommand("rm", "untag an image, and delete it once no tag is left; its layers are freed when no other image holds them");
  rm->add_option("references", flags.references, "NAME[:TAG] untags; an ID deletes the image and all its tags")
      ->required()
      ->type_name("NAME[:TAG]|ID...");
  return image;
}

int RunImageCommand(const CLI::App& image, const ImageFlags& flags) {
  if (image.got_subcommand("import")) return Import(flags);
  if (image.got_subcommand("ls")) return List(flags);
  return Remove(flags);
}

}  // namespace smolbox::cli
