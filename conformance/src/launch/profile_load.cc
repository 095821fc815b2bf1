// Finding a profile by sandbox name: smolbox:BACKEND (this project's runtime, its variables set
// for the backend), a name in the profiles directory, or a path. Its binary is checked before
// the rest, since a missing one is what a user can act on first.
#include "launch/profile.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "battery/json_check.h"
#include "launch/profile_parse.h"
#include "launch/smolbox_install.h"
#include "program.h"

namespace smolvm_check {
namespace {

// The variants of this project's runtime that a sandbox name can pick, as smolbox:NAME: the
// backend and accelerator smolbox runs it with ({backend} and {accel} in profiles/smolbox.json),
// and the flags the variant adds to `smolbox run` (at {variant...}). smolbox:vm-tcg is the vm
// backend on QEMU's emulation, for hosts without KVM; a "-fresh" variant boots every guest from
// scratch, without the boot snapshot. smolbox:api and smolbox:api-vm-tcg reach the runtime
// through its HTTP API instead of its command line: each case is a POST /v1/run to a smolbox
// serve the battery starts (profiles/smolbox-api.json). smolbox:vm-prewarm and
// smolbox:vm-tcg-prewarm are for the bench's warm rows: their sandbox is created with
// --prewarm python.
struct SmolboxVariant {
  std::string name;
  std::string backend;
  std::string accel;
  std::vector<std::string> flags;
  bool api = false;  // through smolbox serve's HTTP API (profiles/smolbox-api.json)
  std::string prewarm = "";  // smolbox create --prewarm's value, for a warm sandbox
};

// clang-format off
const std::vector<SmolboxVariant> kSmolboxVariants = {
    // name          backend  accel   flags
    {"ns",           "ns",    "auto", {}},
    {"auto",         "auto",  "auto", {}},
    {"vm",           "vm",    "auto", {}},
    {"vm-tcg",       "vm",    "tcg",  {}},
    {"vm-fresh",     "vm",    "auto", {"--no-snapshot"}},
    {"vm-tcg-fresh", "vm",    "tcg",  {"--no-snapshot"}},
    {"api",          "auto",  "auto", {},                true},
    {"api-vm-tcg",   "vm",    "tcg",  {},                true},
    {"vm-prewarm",   "vm",    "auto", {},                false, "python"},
    {"vm-tcg-prewarm", "vm",  "tcg",  {},                false, "python"},
};
// clang-format on

// An emulated guest boots in 2-4 s, before the case's own time starts.
constexpr int64_t kTcgBootAllowanceMs = 6000;

bool Contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

bool IsExecutable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

// On this process's PATH, read as execvp(3) reads it.
bool FoundOnPath(const std::string& binary) {
  if (binary.find('/') != std::string::npos) return IsExecutable(binary);
  const char* path = std::getenv("PATH");
  return !smolbox::FindOnPath(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin", binary,
                              smolbox::EmptyPathEntry::kCurrentDir)
              .empty();
}

Expected<void> CheckBinary(const Profile& p, const std::string& sandbox) {
  if (p.binary.empty() || p.syntax_only || FoundOnPath(p.binary)) return {};
  std::string where = p.binary.find('/') != std::string::npos ? "" : " on PATH";
  std::string hint = p.install_hint.empty() ? "" : fmt::format(" ({})", p.install_hint);
  return std::unexpected(
      Error::Field(fmt::format("sandbox {}", sandbox),
                   fmt::format("binary {:?} not found{}{}", p.binary, where, hint)));
}

Expected<Profile> LoadProfileFile(const std::string& path, const std::string& sandbox,
                                  const ProfileSettings& settings) {
  const std::string where = fmt::format("sandbox {}", sandbox);
  auto text = ReadTextFile(path, kMaxProfileBytes);
  if (!text && text.error().errnum == ENOENT) {
    return std::unexpected(
        Error::Field(where, fmt::format("no such profile ({} does not exist)", path)));
  }
  if (!text) return std::unexpected(Within(where, text.error()));
  return ParseProfileWith(*text, path, settings,
                          [&](const Profile& p) { return CheckBinary(p, sandbox); });
}

bool IsProfileName(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
  });
}

// "ns, auto, vm, vm-tcg, vm-fresh or vm-tcg-fresh"
std::string VariantNames() {
  std::string names;
  for (size_t i = 0; i < kSmolboxVariants.size(); ++i) {
    if (i > 0) names += i + 1 == kSmolboxVariants.size() ? " or " : ", ";
    names += kSmolboxVariants[i].name;
  }
  return names;
}

// smolbox:VARIANT, or smolbox:VARIANT@IMAGE to run the cases in an image from smolbox's store
// ({image}: smolbox run --image IMAGE).
Expected<Profile> LoadSmolbox(const std::string& sandbox, const std::string& dir,
                              const std::map<std::string, std::string>& overrides) {
  std::string name = sandbox.substr(std::string_view("smolbox:").size());
  std::string image = "host";
  if (size_t at = name.find('@'); at != std::string::npos) {
    image = name.substr(at + 1);
    name.resize(at);
    if (image.empty()) {
      return std::unexpected(Error::Field(fmt::format("sandbox {}", sandbox), "names no image after @ (smolbox:ns@NAME[:TAG])"));
    }
  }
  auto variant = std::find_if(kSmolboxVariants.begin(), kSmolboxVariants.end(),
                              [&](const SmolboxVariant& v) { return v.name == name; });
  if (variant == kSmolboxVariants.end()) {
    return std::unexpected(
        Error::Field(fmt::format("sandbox {}", sandbox),
                     fmt::format("unknown smolbox backend {:?} ({})", name, VariantNames())));
  }
  ProfileSettings settings{
      {{"backend", variant->backend}, {"accel", variant->accel}, {"smolbox", SmolboxBinary()}, {"image", image}},
      variant->flags, overrides};
  if (!variant->prewarm.empty()) settings.variables["prewarm"] = variant->prewarm;
  const char* file = variant->api ? "/smolbox-api.json" : "/smolbox.json";
  SMOLBOX_ASSIGN_OR_RETURN(Profile profile, LoadProfileFile(dir + file, sandbox, settings));
  profile.name = sandbox;
  profile.fresh_boot = Contains(variant->flags, "--no-snapshot");
  profile.warm_only = !variant->prewarm.empty();
  if (variant->accel == "tcg") profile.startup_allowance_ms = kTcgBootAllowanceMs;
  return profile;
}

}  // namespace

Expected<Profile> LoadProfile(const std::string& sandbox, const std::string& profiles_dir,
                              const std::map<std::string, std::string>& overrides) {
  const std::string dir = profiles_dir.empty() ? "." : profiles_dir;
  if (sandbox.starts_with("smolbox:")) return LoadSmolbox(sandbox, dir, overrides);
  ProfileSettings settings;
  settings.overrides = overrides;
  if (sandbox.find('/') != std::string::npos) return LoadProfileFile(sandbox, sandbox, settings);
  if (IsProfileName(sandbox)) {
    return LoadProfileFile(fmt::format("{}/{}.json", dir, sandbox), sandbox, settings);
  }
  return std::unexpected(
      Error::Field(fmt::format("sandbox {:?}", sandbox), "is neither a profile name nor a path"));
}

}  // namespace smolvm_check
