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

// smolbox:vm-tcg is the vm backend on QEMU's emulation, for hosts without KVM.
// A "-fresh" vm variant boots every guest from scratch: no boot snapshot (--no-snapshot).
const std::vector<std::string> kSmolboxBackends = {"ns", "auto", "vm", "vm-tcg", "vm-fresh", "vm-tcg-fresh"};
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
                                  const std::map<std::string, std::string>& overrides) {
  const std::string where = fmt::format("sandbox {}", sandbox);
  auto text = ReadTextFile(path, kMaxProfileBytes);
  if (!text && text.error().errnum == ENOENT) {
    return std::unexpected(
        Error::Field(where, fmt::format("no such profile ({} does not exist)", path)));
  }
  if (!text) return std::unexpected(Within(where, text.error()));
  return ParseProfileWith(*text, path, overrides,
                          [&](const Profile& p) { return CheckBinary(p, sandbox); });
}

bool IsProfileName(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
  });
}

}  // namespace

Expected<Profile> LoadProfile(const std::string& sandbox, const std::string& profiles_dir) {
  const std::string dir = profiles_dir.empty() ? "." : profiles_dir;
  Expected<Profile> profile;
  if (sandbox.starts_with("smolbox:")) {
    std::string backend = sandbox.substr(8);
    if (!Contains(kSmolboxBackends, backend)) {
      return std::unexpected(
          Error::Field(fmt::format("sandbox {}", sandbox),
                       fmt::format("unknown smolbox backend {:?} (ns, auto, vm, vm-tcg, vm-fresh or vm-tcg-fresh)", backend)));
    }
    bool fresh = backend.ends_with("-fresh");
    if (fresh) backend.resize(backend.size() - std::string_view("-fresh").size());
    bool tcg = backend == "vm-tcg";
    profile = LoadProfileFile(dir + "/smolbox.json", sandbox,
                              {{"backend", tcg ? "vm" : backend}, {"accel", tcg ? "tcg" : "auto"},
                               {"smolbox", SmolboxBinary()}});
    if (profile && fresh) {
      auto run = std::find(profile->command.begin(), profile->command.end(), "run");
      if (run != profile->command.end()) profile->command.insert(run + 1, "--no-snapshot");
      profile->fresh_boot = true;
    }
  } else if (sandbox.find('/') != std::string::npos) {
    profile = LoadProfileFile(sandbox, sandbox, {});
  } else if (IsProfileName(sandbox)) {
    profile = LoadProfileFile(fmt::format("{}/{}.json", dir, sandbox), sandbox, {});
  } else {
    return std::unexpected(
        Error::Field(fmt::format("sandbox {:?}", sandbox), "is neither a profile name nor a path"));
  }
  if (profile && sandbox.starts_with("smolbox:")) profile->name = sandbox;
  // An emulated guest boots in 2-4 s, before the case's own time starts.
  if (profile && sandbox.starts_with("smolbox:vm-tcg")) profile->startup_allowance_ms = kTcgBootAllowanceMs;
  return profile;
}

}  // namespace smolvm_check
