#include "launch.h"

#include <sys/random.h>
#include <sys/stat.h>

#include <fmt/format.h>

#include "client.h"
#include "json_bounds.h"
#include "sandbox_state.h"
#include "smolbox/result.h"
#include "smolbox_child.h"
#include "state.h"

namespace smolbox::api {
namespace {

// What a create's child prints: the setup's JSON.
constexpr size_t kMaxCreateOutput = 1 << 20;

}  // namespace

void Launcher::AddVolumeRoot(std::vector<std::string>& args) const {
  if (volume_root.empty()) return;
  args.push_back("--volume-root");
  args.push_back(volume_root);
}

Expected<nlohmann::json> Launcher::Run(const std::string& spec_json, const RunSpec& spec) const {
  // Each stream's bytes may take 6 in JSON (\u0000), and the result's other fields are small.
  size_t bound = static_cast<size_t>(spec.exec.limits.output_bytes) * 12 + (1 << 20);
  std::vector<std::string> args = {"run", "--json", "--spec", "/dev/stdin"};
  AddVolumeRoot(args);
  SMOLBOX_ASSIGN_OR_RETURN(auto child, RunChild(smolbox_exe, args, spec_json, bound, -1, cancel_fd));
  SMOLBOX_ASSIGN_OR_RETURN(auto doc, ParseBoundedJson(child.stdout_data, {.max_bytes = bound}, "the run's result"));
  SMOLBOX_TRY(ResultFromJson(doc));  // it is a result
  return doc;
}

Expected<nlohmann::json> Launcher::Create(const std::string& id, const std::string& spec_json) const {
  std::vector<std::string> args = {"create", "--json", "--spec", "/dev/stdin", "--lifeline-fd", "3"};
  AddVolumeRoot(args);
  args.push_back(id);
  auto child = RunChild(smolbox_exe, args, spec_json, kMaxCreateOutput, lifeline_fd, cancel_fd);
  auto doc = child ? ParseBoundedJson(child->stdout_data, {.max_bytes = kMaxCreateOutput}, "the create's result")
                   : std::unexpected(child.error());
  if (doc && doc->is_object() && doc->value("status", "") == "created") {
    doc->erase("name");
    return *doc;
  }
  std::string reason = !doc                ? doc.error().ToString()
                       : doc->is_object() ? doc->value("error", "")
                                          : "the create printed no result";
  return std::unexpected(Error::Field("sandbox", "could not be created: " + reason));
}

Expected<void> CheckVolumeRoot(const std::string& volume_root) {
  struct stat st{};
  if (!volume_root.starts_with('/')) return std::unexpected(Error::Field("--volume-root", "must be an absolute path"));
  if (stat(volume_root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return std::unexpected(Error::Field("--volume-root", volume_root + " is not a directory"));
  }
  return {};
}

Expected<std::string> NewSandboxId() {
  unsigned char bytes[8];
  if (getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    return std::unexpected(Error::Sys("getrandom"));
  }
  std::string id(kSandboxPrefix);
  for (unsigned char b : bytes) id += fmt::format("{:02x}", b);
  return id;
}

void SweepDeadApiSandboxes(const char* who) {
  shared::SweepStaleRuns();
  auto listing = persist::ListSandboxes();
  if (!listing) return;
  for (const auto& box : *listing) {
    if (!box.name.starts_with(kSandboxPrefix) || box.status != persist::SandboxStatus::kDead) continue;
    if (auto removed = persist::RemoveSandbox(box.name, true); !removed) {
      fmt::print(stderr, "{}: warning: {}\n", who, removed.error().ToString());
    }
  }
}

}  // namespace smolbox::api
