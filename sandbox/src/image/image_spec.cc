#include "smolbox/image_spec.h"

#include <fcntl.h>

#include <fmt/format.h>

#include <charconv>
#include <optional>

#include "beneath.h"
#include "bounded_read.h"
#include "trust_store.h"
#include "unique_fd.h"

namespace smolbox::image {
namespace {

constexpr size_t kMaxAccountsFile = 4 << 20;

std::optional<uint32_t> Number(std::string_view text) {
  uint32_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// The image's /etc/passwd or /etc/group, beneath its root: a link there could name a host
// file, and is refused. An image without the file has no accounts: "".
Expected<std::string> ReadAccounts(const std::string& rootfs, const std::string& name) {
  UniqueFd root(open(rootfs.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) return std::unexpected(Error::Sys("open the image's root " + rootfs));
  UniqueFd fd(OpenBeneath(root.get(), name, O_RDONLY));
  if (!fd.valid() && errno == ENOENT) return std::string();
  if (!fd.valid() && (errno == ELOOP || errno == EXDEV)) {
    return std::unexpected(Error::Field("image", fmt::format("its /{} is a link; a User is looked up in the image's "
                                                             "own file only", name)));
  }
  if (!fd.valid()) return std::unexpected(Error::Sys("open the image's /" + name));
  return ReadBounded(fd.get(), kMaxAccountsFile, "the image's /" + name);
}

// The line of an accounts file whose first field is key (a name) or, when by_id, whose third
// field is: its fields.
std::optional<std::vector<std::string>> FindAccount(const std::string& text, const std::string& key, bool by_id) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::vector<std::string> fields;
    for (size_t f = start; f <= end;) {
      size_t colon = text.find(':', f);
      if (colon == std::string::npos || colon > end) colon = end;
      fields.push_back(text.substr(f, colon - f));
      f = colon + 1;
    }
    if (fields.size() >= 4 && fields[by_id ? 2 : 0] == key) return fields;
    start = end + 1;
  }
  return std::nullopt;
}

Error NotFound(const std::string& user, const std::string& what, const std::string& file) {
  return Error::Field("image", fmt::format("its User {:?}: {} is not in the image's {}", user, what, file));
}

}  // namespace

Expected<WorkloadUser> ResolveImageUser(const std::string& rootfs, const std::string& user) {
  size_t colon = user.find(':');
  std::string name = user.substr(0, colon);
  std::optional<std::string> group = colon == std::string::npos ? std::nullopt : std::optional(user.substr(colon + 1));
  WorkloadUser ids;
  SMOLBOX_ASSIGN_OR_RETURN(auto passwd, ReadAccounts(rootfs, "etc/passwd"));
  if (auto number = Number(name)) {
    ids.uid = *number;
    auto account = FindAccount(passwd, name, true);
    auto listed_gid = account ? Number((*account)[3]) : std::nullopt;
    ids.gid = listed_gid.value_or(*number);
  } else {
    auto account = FindAccount(passwd, name, false);
    if (!account) return std::unexpected(NotFound(user, name, "/etc/passwd"));
    auto uid = Number((*account)[2]);
    auto gid = Number((*account)[3]);
    if (!uid || !gid) return std::unexpected(NotFound(user, name, "/etc/passwd, with numeric ids,"));
    ids = {*uid, *gid};
  }
  if (group) {
    if (auto number = Number(*group)) {
      ids.gid = *number;
    } else {
      SMOLBOX_ASSIGN_OR_RETURN(auto groups, ReadAccounts(rootfs, "etc/group"));
      auto entry = FindAccount(groups, *group, false);
      auto gid = entry && entry->size() >= 3 ? Number((*entry)[2]) : std::nullopt;
      if (!gid) return std::unexpected(NotFound(user, "group " + *group, "/etc/group"));
      ids.gid = *gid;
    }
  }
  if (ids.uid > kMaxWorkloadId || ids.gid > kMaxWorkloadId) {
    return std::unexpected(Error::Field("image", fmt::format("its User {:?} is {}:{}; a sandbox maps ids 0 to {} only",
                                                             user, ids.uid, ids.gid, kMaxWorkloadId)));
  }
  return ids;
}

Expected<ImageInfo> ApplyStoreImage(RunSpec& spec, const CallerChoices& given) {
  SMOLBOX_ASSIGN_OR_RETURN(auto store, ImageStore::Open());
  return ApplyStoreImage(store, spec, given);
}

Expected<ImageInfo> ApplyStoreImage(const ImageStore& store, RunSpec& spec, const CallerChoices& given) {
  SMOLBOX_ASSIGN_OR_RETURN(auto image, store.Find(spec.sandbox.image));
  const ImageConfig& config = image.config;
  spec.sandbox.image = store.RootfsOf(image);
  for (const std::string& entry : config.env) {
    size_t equals = entry.find('=');
    std::string name = entry.substr(0, equals);
    // A caller's CA bundle joins the image's own in one file, which these variables name: the
    // image's values for them would leave the caller's certificates out.
    if (!spec.sandbox.ca_bundle.empty() && IsCaBundleVariable(name)) continue;
    spec.exec.env.try_emplace(name, entry.substr(equals + 1));
  }
  if (!given.workdir && !spec.exec.workdir && !config.working_dir.empty()) spec.exec.workdir = config.working_dir;
  // As docker: the caller's entrypoint replaces the image's and drops its Cmd with it.
  std::vector<std::string> argv = spec.exec.entrypoint.value_or(config.entrypoint);
  const std::vector<std::string>& rest = spec.exec.argv.empty() && !spec.exec.entrypoint ? config.cmd : spec.exec.argv;
  argv.insert(argv.end(), rest.begin(), rest.end());
  spec.exec.argv = std::move(argv);
  spec.exec.entrypoint.reset();
  if (!given.user && !config.user.empty()) {
    SMOLBOX_ASSIGN_OR_RETURN(spec.sandbox.user, ResolveImageUser(spec.sandbox.image, config.user));
  }
  return image;
}

Expected<void> ResolveSpecImage(RunSpec& spec, CallerChoices given) {
  if (!IsStoreReference(spec.sandbox.image)) {
    // No image config: an entrypoint is just the front of the command.
    if (spec.exec.entrypoint) {
      spec.exec.argv.insert(spec.exec.argv.begin(), spec.exec.entrypoint->begin(), spec.exec.entrypoint->end());
      spec.exec.entrypoint.reset();
    }
    return {};
  }
  given.user = given.user || spec.sandbox.user != WorkloadUser::Sandbox();
  given.workdir = given.workdir || spec.sandbox.workdir != SandboxSpec{}.workdir;
  SMOLBOX_TRY(ApplyStoreImage(spec, given));
  return {};
}

}  // namespace smolbox::image
