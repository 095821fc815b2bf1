#include "smolbox/image_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstdlib>
#include <map>
#include <random>
#include <set>

#include "beneath.h"
#include "bounded_read.h"
#include "digest.h"
#include "image_config.h"
#include "image_input.h"
#include "image_manifest.h"
#include "json_bounds.h"
#include "layer_extract.h"
#include "mutant.h"
#include "owned_dir.h"
#include "unique_fd.h"

namespace smolbox::image {
namespace {

using json = nlohmann::json;
using Tags = std::map<std::string, std::string>;  // "name:tag" -> image ID

constexpr size_t kMaxRecordBytes = 4 << 20;
constexpr size_t kMinIdPrefix = 12;

std::string RandomName(const char* prefix) {
  std::random_device rd;
  return fmt::format("{}{:08x}{:08x}", prefix, rd(), rd());
}

class Lock {
 public:
  static Expected<Lock> Take(const std::string& path, int operation) {
    UniqueFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd.valid()) return std::unexpected(Error::Sys("open " + path));
    int rc;
    do rc = flock(fd.get(), operation);
    while (rc != 0 && errno == EINTR);
    if (rc != 0) return std::unexpected(Error::Sys("flock " + path));
    return Lock(std::move(fd));
  }
  bool Convert(int operation) { return flock(fd_.get(), operation) == 0; }

 private:
  explicit Lock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

// A directory under tmp/, removed with all it holds unless committed.
class Staging {
 public:
  Staging(std::string tmp_dir, UniqueFd tmp_fd, std::string name, UniqueFd fd)
      : tmp_dir_(std::move(tmp_dir)), tmp_fd_(std::move(tmp_fd)), name_(std::move(name)), fd_(std::move(fd)) {}
  Staging(Staging&&) = default;
  ~Staging() {
    if (tmp_fd_.valid()) (void)RemoveTree(tmp_fd_.get(), name_);
  }
  int fd() const { return fd_.get(); }
  std::string path() const { return tmp_dir_ + "/" + name_; }

 private:
  std::string tmp_dir_;
  UniqueFd tmp_fd_;
  std::string name_;
  UniqueFd fd_;
};

Expected<Staging> MakeStaging(const std::string& tmp_dir, const char* prefix) {
  UniqueFd tmp(open(tmp_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!tmp.valid()) return std::unexpected(Error::Sys("open " + tmp_dir));
  std::string name = RandomName(prefix);
  if (mkdirat(tmp.get(), name.c_str(), 0700) != 0) return std::unexpected(Error::Sys("mkdir " + tmp_dir + "/" + name));
  UniqueFd fd(OpenBeneath(tmp.get(), name, O_RDONLY | O_DIRECTORY));
  if (!fd.valid()) return std::unexpected(Error::Sys("open " + tmp_dir + "/" + name));
  return Staging(tmp_dir, std::move(tmp), std::move(name), std::move(fd));
}

Expected<std::string> ReadFileText(const std::string& path, size_t max_bytes) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return std::unexpected(Error::Sys("open " + path));
  return ReadBounded(fd.get(), max_bytes, path);
}

// Written whole or not at all: a temporary file renamed over the old one.
Expected<void> WriteFileAtomic(const std::string& path, const std::string& text) {
  std::string temp = path + RandomName(".tmp-");
  UniqueFd fd(open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd.valid()) return std::unexpected(Error::Sys("create " + temp));
  bool ok = write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size()) && fsync(fd.get()) == 0;
  if (!ok || rename(temp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(temp.c_str());
    return std::unexpected(Error::Sys("write " + path, err));
  }
  return {};
}

bool ValidTag(std::string_view tag) {
  if (tag.empty() || tag.size() > 128) return false;
  for (size_t i = 0; i < tag.size(); ++i) {
    char c = tag[i];
    bool word = std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    if (!(word || (i > 0 && (c == '.' || c == '-')))) return false;
  }
  return true;
}

// Lowercase letters, digits and . _ - / as docker's names have, and a registry's :port
// before the first slash.
bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 255 || !std::isalnum(static_cast<unsigned char>(name[0]))) return false;
  size_t first_slash = name.find('/');
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' || c == '/' ||
              (c == ':' && first_slash != std::string_view::npos && i < first_slash);
    if (!ok) return false;
  }
  return !name.ends_with('/') && name.find("//") == std::string_view::npos;
}

}  // namespace

Expected<std::string> DefaultStoreRoot() {
  if (geteuid() == 0) return std::string("/var/lib/smolbox/images");
  if (const char* xdg = getenv("XDG_DATA_HOME"); xdg && *xdg == '/') return std::string(xdg) + "/smolbox/images";
  if (const char* home = getenv("HOME"); home && *home == '/') return std::string(home) + "/.local/share/smolbox/images";
  return std::unexpected(Error{"image store", "neither XDG_DATA_HOME nor HOME is an absolute path", 0});
}

bool IsStoreReference(const std::string& image) {
  return image != "host" && !image.starts_with('/') && !image.starts_with('.');
}

Expected<std::string> NormalizeReference(const std::string& reference, const std::string& field) {
  if (reference.find('@') != std::string::npos) {
    return std::unexpected(Error::Field(field, fmt::format("{:?}: references by digest are not supported; use the image ID", reference)));
  }
  size_t colon = reference.rfind(':');
  size_t slash = reference.rfind('/');
  bool has_tag = colon != std::string::npos && (slash == std::string::npos || colon > slash);
  std::string name = has_tag ? reference.substr(0, colon) : reference;
  std::string tag = has_tag ? reference.substr(colon + 1) : "latest";
  if (!ValidName(name)) {
    return std::unexpected(Error::Field(field, fmt::format("{:?} is not an image name: lowercase letters, digits and . _ - /", reference)));
  }
  if (!ValidTag(tag)) {
    return std::unexpected(Error::Field(field, fmt::format("{:?} has no valid tag: up to 128 letters, digits and _ . -", reference)));
  }
  return name + ":" + tag;
}

// Everything below works on the store's files; the class is a thin face over them.
namespace {

struct Paths {
  std::string root;
  std::string tags() const { return root + "/tags.json"; }
  std::string lock() const { return root + "/lock"; }
  std::string gc_lock() const { return root + "/gc.lock"; }
  std::string blobs() const { return root + "/blobs"; }
  std::string blob_dir() const { return root + "/blobs/sha256"; }
  std::string blob(const std::string& digest) const { return blob_dir() + "/" + DigestHex(digest); }
  std::string images() const { return root + "/images"; }
  std::string image(const std::string& id) const { return images() + "/" + DigestHex(id); }
  std::string tmp() const { return root + "/tmp"; }
};

Expected<Tags> ReadTags(const Paths& paths) {
  struct stat st {};
  if (lstat(paths.tags().c_str(), &st) != 0 && errno == ENOENT) return Tags{};
  SMOLBOX_ASSIGN_OR_RETURN(auto text, ReadFileText(paths.tags(), kMaxRecordBytes));
  SMOLBOX_ASSIGN_OR_RETURN(auto doc, ParseBoundedJson(text, {.max_bytes = kMaxRecordBytes}, paths.tags()));
  Tags tags;
  if (!doc.is_object()) return std::unexpected(Error{paths.tags(), "is not a JSON object", 0});
  for (const auto& [name, id] : doc.items()) {
    if (id.is_string() && IsSha256Digest(id.get<std::string>())) tags[name] = id.get<std::string>();
  }
  return tags;
}

Expected<void> WriteTags(const Paths& paths, const Tags& tags) {
  return WriteFileAtomic(paths.tags(), json(tags).dump(2) + "\n");
}

Expected<ImageInfo> ReadRecord(const Paths& paths, const std::string& id, const Tags& tags) {
  std::string file = paths.image(id) + "/image.json";
  SMOLBOX_ASSIGN_OR_RETURN(auto text, ReadFileText(file, kMaxRecordBytes));
  SMOLBOX_ASSIGN_OR_RETURN(auto doc, ParseBoundedJson(text, {.max_bytes = kMaxRecordBytes}, file));
  SMOLBOX_ASSIGN_OR_RETURN(auto image, RecordFromJson(doc, file));
  if (image.id != id) return std::unexpected(Error{file, "names another image ID", 0});
  for (const auto& [name, tagged] : tags) {
    if (tagged == id) image.names.push_back(name);
  }
  return image;
}

Expected<std::vector<std::string>> ImageIds(const Paths& paths) {
  UniqueFd dir(open(paths.images().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir.valid()) return std::unexpected(Error::Sys("open " + paths.images()));
  SMOLBOX_ASSIGN_OR_RETURN(auto names, ListNames(dir.get()));
  std::vector<std::string> ids;
  for (const std::string& name : names) {
    if (IsSha256Digest("sha256:" + name)) ids.push_back("sha256:" + name);
  }
  return ids;
}

// With no import running (the caller holds gc.lock exclusively): what a killed or refused
// import left in tmp/, and every blob that no image holds.
Expected<void> CollectGarbage(const Paths& paths) {
  UniqueFd tmp(open(paths.tmp().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!tmp.valid()) return std::unexpected(Error::Sys("open " + paths.tmp()));
  SMOLBOX_TRY(RemoveChildren(tmp.get(), [](const std::string&) { return false; }));
  std::set<std::string> held;
  SMOLBOX_ASSIGN_OR_RETURN(auto tags, ReadTags(paths));
  SMOLBOX_ASSIGN_OR_RETURN(auto ids, ImageIds(paths));
  for (const std::string& id : ids) {
    auto image = ReadRecord(paths, id, tags);
    if (!image) return std::unexpected(image.error());
    for (const std::string& layer : image->layers) held.insert(DigestHex(layer));
  }
  UniqueFd blobs(open(paths.blob_dir().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!blobs.valid()) return std::unexpected(Error::Sys("open " + paths.blob_dir()));
  return RemoveChildren(blobs.get(), [&](const std::string& name) { return held.contains(name); });
}

Expected<void> MakeLayout(const Paths& paths) {
  for (const std::string& dir : {paths.root, paths.images()}) SMOLBOX_TRY(EnsureOwnedDir(dir, 0711));
  for (const std::string& dir : {paths.blobs(), paths.blob_dir(), paths.tmp()}) SMOLBOX_TRY(EnsureOwnedDir(dir, 0700));
  return {};
}

// The layer's blob in the store, copied in from the input with its digest checked, unless an
// earlier import left it there already.
Expected<UniqueFd> StoreBlob(const Paths& paths, const ImageInput& input, const BlobRef& layer, int64_t max_bytes,
                             const std::string& what) {
  std::string path = paths.blob(layer.digest);
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.valid()) return fd;
  SMOLBOX_ASSIGN_OR_RETURN(auto from, input.OpenFile(layer.path));
  std::string temp = paths.blob_dir() + "/" + RandomName(".tmp-");
  UniqueFd out(open(temp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out.valid()) return std::unexpected(Error::Sys("create " + temp));
  auto digest = Sha256Of(from.get(), out.get(), max_bytes, what);
  if (!digest || *digest != layer.digest) {
    unlink(temp.c_str());
    if (!digest) return std::unexpected(digest.error());
    return std::unexpected(Error{what, fmt::format("its content is {}, not the {} its manifest names; refusing the image", *digest, layer.digest), 0});
  }
  if (rename(temp.c_str(), path.c_str()) != 0) {
    unlink(temp.c_str());
    return std::unexpected(Error::Sys("rename into " + path));
  }
  return out;
}

Expected<ImageInfo> ReadConfig(const ImageInput& input, const BlobRef& config) {
  SMOLBOX_ASSIGN_OR_RETURN(auto text, input.ReadSmall(config.path, kMaxManifestBytes));
  std::string what = fmt::format("config {} of {}", config.path, input.origin());
  if (Sha256Of(text) != config.digest) {
    return std::unexpected(Error{"import", fmt::format("{}: its content does not match its digest {}; refusing it", what, config.digest), 0});
  }
  SMOLBOX_ASSIGN_OR_RETURN(auto doc, ParseBoundedJson(text, {.max_bytes = kMaxManifestBytes}, what));
  SMOLBOX_ASSIGN_OR_RETURN(auto image, ParseImageConfig(doc, what));
  image.id = config.digest;
  return image;
}

// Unpacks one image into staging/<id>/rootfs; committed by the caller.
Expected<ImageInfo> Unpack(const Paths& paths, const ImageInput& input, const ImageEntry& entry,
                           const ImportOptions& options, int staging, std::vector<std::string>& warnings) {
  SMOLBOX_ASSIGN_OR_RETURN(auto image, ReadConfig(input, entry.config));
  // Imported before: only its names are new (Commit keeps the tree the store has).
  struct stat st {};
  if (lstat(paths.image(image.id).c_str(), &st) == 0) return ReadRecord(paths, image.id, {});
  std::string hex = DigestHex(image.id);
  if (mkdirat(staging, hex.c_str(), 0711) != 0) return std::unexpected(Error::Sys("mkdir a staging image"));
  UniqueFd dir(OpenBeneath(staging, hex, O_RDONLY | O_DIRECTORY));
  if (!dir.valid() || mkdirat(dir.get(), "rootfs", 0755) != 0) return std::unexpected(Error::Sys("mkdir a staging rootfs"));
  UniqueFd rootfs(OpenBeneath(dir.get(), "rootfs", O_RDONLY | O_DIRECTORY));
  if (!rootfs.valid()) return std::unexpected(Error::Sys("open a staging rootfs"));
  LayerBudget budget{options.max_bytes, options.max_files};
  if (!SMOLBOX_PROTECTED("image_limits")) budget = {INT64_MAX, INT64_MAX};  // mutant.h
  for (size_t i = 0; i < entry.layers.size(); ++i) {
    const BlobRef& layer = entry.layers[i];
    std::string what = fmt::format("layer {} ({}) of {}", i + 1, layer.path, input.origin());
    SMOLBOX_ASSIGN_OR_RETURN(auto blob, StoreBlob(paths, input, layer, options.max_bytes, what));
    SMOLBOX_TRY(ApplyLayer(blob.get(), rootfs.get(), what, budget, warnings));
    image.layers.push_back(layer.digest);
  }
  // The mode the image gave its root; the store's own directory was made 0755.
  fchmod(rootfs.get(), 0755);
  image.size_bytes = options.max_bytes - budget.bytes_left;
  std::string record = RecordToJson(image).dump(2) + "\n";
  UniqueFd out(openat(dir.get(), "image.json", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!out.valid() || write(out.get(), record.data(), record.size()) != static_cast<ssize_t>(record.size())) {
    return std::unexpected(Error::Sys("write image.json"));
  }
  return image;
}

// An OCI layout may name an image by its tag alone (skopeo's oci:DIR:TAG): "1.0" is no name.
bool IsBareTag(const std::string& name) { return name.find(':') == std::string::npos && name.find('/') == std::string::npos; }

// As docker shows a name: without its default registry.
std::string ShortName(const std::string& name) {
  for (std::string_view prefix : {"docker.io/library/", "docker.io/"}) {
    if (name.starts_with(prefix)) return name.substr(prefix.size());
  }
  return name;
}

// Which of the input's images to import, and under which names.
Expected<std::vector<ImageEntry>> Choose(std::vector<ImageEntry> entries, const ImportOptions& options,
                                         const std::string& origin, std::vector<std::string>& warnings) {
  std::optional<std::string> wanted;
  if (options.name) {
    SMOLBOX_ASSIGN_OR_RETURN(wanted, NormalizeReference(*options.name, "--name"));
  }
  std::string held;
  for (const ImageEntry& entry : entries) {
    for (const std::string& name : entry.names) {
      held += (held.empty() ? "" : ", ") + name;
      auto normal = NormalizeReference(ShortName(name), "");
      bool match = wanted && ((normal && *normal == *wanted) || (IsBareTag(name) && wanted->ends_with(":" + name)));
      if (match) {
        ImageEntry chosen = entry;
        chosen.names = {*wanted};
        return std::vector<ImageEntry>{chosen};
      }
    }
  }
  if (wanted && entries.size() == 1) {
    entries[0].names = {*wanted};
    return entries;
  }
  if (wanted) {
    return std::unexpected(Error::Field("--name", fmt::format("{} holds no image named {} (it holds: {})", origin, *wanted,
                                                              held.empty() ? "only unnamed images" : held)));
  }
  for (ImageEntry& entry : entries) {
    std::vector<std::string> names;
    for (const std::string& name : entry.names) {
      if (IsBareTag(name)) continue;
      if (auto normal = NormalizeReference(ShortName(name), ""); normal) names.push_back(*normal);
    }
    if (names.empty()) warnings.push_back(fmt::format("an image of {} has no name; use its ID, or import it with --name", origin));
    entry.names = std::move(names);
  }
  return entries;
}

Expected<void> Commit(const Paths& paths, const Staging& staging, const ImageInfo& image,
                      const std::vector<std::string>& names) {
  SMOLBOX_ASSIGN_OR_RETURN(auto lock, Lock::Take(paths.lock(), LOCK_EX));
  std::string from = staging.path() + "/" + DigestHex(image.id);
  struct stat st {};
  // An import of the same image that finished first already holds it.
  if (lstat(paths.image(image.id).c_str(), &st) != 0 && rename(from.c_str(), paths.image(image.id).c_str()) != 0) {
    return std::unexpected(Error::Sys("rename into " + paths.image(image.id)));
  }
  SMOLBOX_ASSIGN_OR_RETURN(auto tags, ReadTags(paths));
  for (const std::string& name : names) tags[name] = image.id;
  return WriteTags(paths, tags);
}

// The input, its tar's files (all, or only the small ones) unpacked in staging/dir_name.
Expected<ImageInput> OpenInput(const Staging& staging, const char* dir_name, const std::string& source,
                               const ImportOptions& options, ImageInput::Files files) {
  if (mkdirat(staging.fd(), dir_name, 0700) != 0) return std::unexpected(Error::Sys("mkdir a staging input"));
  UniqueFd dir(OpenBeneath(staging.fd(), dir_name, O_RDONLY | O_DIRECTORY));
  if (!dir.valid()) return std::unexpected(Error::Sys("open a staging input"));
  return ImageInput::Open(source, dir.get(), options.max_bytes, options.max_files, files);
}

// Whether the store holds every image of entries, by its config's digest (checked).
bool AllHeld(const Paths& paths, const ImageInput& input, const std::vector<ImageEntry>& entries) {
  return std::all_of(entries.begin(), entries.end(), [&](const ImageEntry& entry) {
    auto image = ReadConfig(input, entry.config);
    struct stat st {};
    return image && lstat(paths.image(image->id).c_str(), &st) == 0;
  });
}

// An import's hold on gc.lock, shared with other imports. With no other import running, what
// killed ones left is swept first. The lock is tried exclusive before it is held shared, never
// upgraded: Linux drops a shared flock whose non-blocking upgrade fails, and another import
// could then sweep this one's staging away.
Expected<Lock> TakeImportLock(const Paths& paths) {
  auto alone = Lock::Take(paths.gc_lock(), LOCK_EX | LOCK_NB);
  if (!alone) {
    if (alone.error().errnum != EWOULDBLOCK) return alone;
    return Lock::Take(paths.gc_lock(), LOCK_SH);
  }
  SMOLBOX_TRY(CollectGarbage(paths));
  // Waits, should another import take the lock in the moment between the two.
  if (!alone->Convert(LOCK_SH)) return std::unexpected(Error::Sys("flock " + paths.gc_lock()));
  return alone;
}

// What a refused import left, gone, when no other import runs. A failed upgrade drops the
// shared lock; the import holds nothing by then.
void SweepAfterFailure(const Paths& paths, Lock& gc) {
  if (gc.Convert(LOCK_EX | LOCK_NB)) (void)CollectGarbage(paths);
}

}  // namespace

Expected<ImageStore> ImageStore::Open(std::string root) {
  if (root.empty()) {
    if (const char* set = getenv("SMOLBOX_IMAGE_STORE"); set && *set) root = set;
  }
  if (root.empty()) {
    SMOLBOX_ASSIGN_OR_RETURN(root, DefaultStoreRoot());
    // The parents of the default root, as XDG and the FHS name them.
    std::string parent = root.substr(0, root.rfind('/'));
    if (mkdir(parent.c_str(), 0711) != 0 && errno != EEXIST) return std::unexpected(Error::Sys("mkdir " + parent));
  }
  if (!root.starts_with('/')) return std::unexpected(Error{"image store", fmt::format("{:?} is not an absolute path", root), 0});
  SMOLBOX_TRY(MakeLayout(Paths{root}));
  return ImageStore(std::move(root));
}

Expected<ImportResult> ImageStore::Import(const std::string& source, const ImportOptions& options) {
  Paths paths{root_};
  SMOLBOX_ASSIGN_OR_RETURN(auto gc, TakeImportLock(paths));
  ImportResult result;
  auto imported = [&]() -> Expected<void> {
    SMOLBOX_ASSIGN_OR_RETURN(auto staging, MakeStaging(paths.tmp(), "import-"));
    // A tar is read for its small files first: when the store holds every image it names, that
    // is all the import needs. Otherwise, or on any error, it is read again, whole.
    SMOLBOX_ASSIGN_OR_RETURN(auto input, OpenInput(staging, "small", source, options, ImageInput::Files::kSmallOnly));
    auto entries = ReadImageList(input);
    if (entries) entries = Choose(std::move(*entries), options, source, result.warnings);
    if (!input.complete() && !(entries && AllHeld(paths, input, *entries))) {
      result.warnings.clear();
      SMOLBOX_ASSIGN_OR_RETURN(input, OpenInput(staging, "input", source, options, ImageInput::Files::kAll));
      SMOLBOX_ASSIGN_OR_RETURN(auto found, ReadImageList(input));
      entries = Choose(std::move(found), options, source, result.warnings);
    }
    if (!entries) return std::unexpected(entries.error());
    for (const ImageEntry& entry : *entries) {
      SMOLBOX_ASSIGN_OR_RETURN(auto image, Unpack(paths, input, entry, options, staging.fd(), result.warnings));
      SMOLBOX_TRY(Commit(paths, staging, image, entry.names));
      image.names = entry.names;
      result.images.push_back(std::move(image));
    }
    return {};
  }();
  if (!imported) {
    SweepAfterFailure(paths, gc);
    return std::unexpected(imported.error());
  }
  return result;
}

Expected<std::vector<ImageInfo>> ImageStore::List() const {
  Paths paths{root_};
  SMOLBOX_ASSIGN_OR_RETURN(auto tags, ReadTags(paths));
  SMOLBOX_ASSIGN_OR_RETURN(auto ids, ImageIds(paths));
  std::vector<ImageInfo> images;
  for (const std::string& id : ids) {
    auto image = ReadRecord(paths, id, tags);
    // Removed while we listed: no longer there to list.
    if (!image && image.error().errnum == ENOENT) continue;
    if (!image) return std::unexpected(image.error());
    images.push_back(std::move(*image));
  }
  return images;
}

Expected<ImageInfo> ImageStore::Find(const std::string& reference) const {
  Paths paths{root_};
  SMOLBOX_ASSIGN_OR_RETURN(auto tags, ReadTags(paths));
  auto missing = [&] {
    return Error::Field("image", fmt::format("no image {:?} in the store {} (images are never pulled; "
                                             "add one with smolbox image import FILE)", reference, root_));
  };
  auto name = NormalizeReference(reference, "image");
  if (name && tags.contains(*name)) return ReadRecord(paths, tags.at(*name), tags);
  std::string hex = reference.starts_with("sha256:") ? reference.substr(7) : reference;
  bool id_like = !hex.empty() && hex.find_first_not_of("0123456789abcdef") == std::string::npos;
  // Neither a name nor an ID: say what is wrong with it, not that the store lacks it.
  if (!name && !id_like) return std::unexpected(name.error());
  if (hex.size() < kMinIdPrefix) return std::unexpected(missing());
  SMOLBOX_ASSIGN_OR_RETURN(auto ids, ImageIds(paths));
  std::vector<std::string> matches;
  for (const std::string& id : ids) {
    if (DigestHex(id).starts_with(hex)) matches.push_back(id);
  }
  if (matches.size() > 1) return std::unexpected(Error::Field("image", fmt::format("{:?} is the start of more than one image ID", reference)));
  if (matches.empty()) return std::unexpected(missing());
  return ReadRecord(paths, matches[0], tags);
}

Expected<std::vector<std::string>> ImageStore::Remove(const std::string& reference) {
  Paths paths{root_};
  SMOLBOX_ASSIGN_OR_RETURN(auto gc, Lock::Take(paths.gc_lock(), LOCK_EX));
  SMOLBOX_ASSIGN_OR_RETURN(auto lock, Lock::Take(paths.lock(), LOCK_EX));
  SMOLBOX_ASSIGN_OR_RETURN(auto image, Find(reference));
  SMOLBOX_ASSIGN_OR_RETURN(auto tags, ReadTags(paths));
  std::vector<std::string> done;
  auto name = NormalizeReference(reference, "image");
  bool by_name = name && tags.contains(*name);
  for (auto it = tags.begin(); it != tags.end();) {
    bool untag = it->second == image.id && (!by_name || it->first == *name);
    if (untag) done.push_back("untagged: " + it->first);
    it = untag ? tags.erase(it) : std::next(it);
  }
  SMOLBOX_TRY(WriteTags(paths, tags));
  bool still_tagged = std::any_of(tags.begin(), tags.end(), [&](const auto& t) { return t.second == image.id; });
  if (!still_tagged) {
    // Out of sight at once, by rename; then removed.
    std::string parked = paths.tmp() + "/" + RandomName("removed-");
    if (rename(paths.image(image.id).c_str(), parked.c_str()) != 0) return std::unexpected(Error::Sys("rename " + paths.image(image.id)));
    done.push_back("deleted: " + image.id);
    SMOLBOX_TRY(CollectGarbage(paths));
  }
  return done;
}

std::string ImageStore::RootfsOf(const ImageInfo& image) const { return Paths{root_}.image(image.id) + "/rootfs"; }

}  // namespace smolbox::image
