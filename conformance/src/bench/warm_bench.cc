#include "bench/warm_bench.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "launch/subprocess.h"

namespace smolvm_check {
namespace {

// Bounds each warm exec; it bounds, it does not time.
constexpr const char* kExecTimeout = "60s";

std::string SandboxName() {
  std::random_device rd;
  return fmt::format("bench-{:08x}{:08x}", rd(), rd());
}

std::string Variable(const Profile& profile, const std::string& name) {
  auto it = profile.variables.find(name);
  return it == profile.variables.end() ? "" : it->second;
}

}  // namespace

bool IsBareInterpreter(const Profile& profile) { return profile.name == "null"; }

bool HasWarmPath(const Profile& profile) {
  // A fresh-boot variant's warm exec is its snapshot sibling's: the VM is up either way.
  return IsBareInterpreter(profile) || (profile.name.starts_with("smolbox:") && !profile.fresh_boot);
}

Expected<std::unique_ptr<WarmSandbox>> WarmSandbox::Prepare(const Profile& profile, const std::string& payload_dir) {
  std::unique_ptr<WarmSandbox> warm(new WarmSandbox());
  warm->payload_dir_ = payload_dir;
  if (IsBareInterpreter(profile)) return warm;
  if (!HasWarmPath(profile)) return std::unexpected(Error{profile.name, "has no warm path", 0});
  std::vector<std::string> argv = {Variable(profile, "smolbox"), "create", SandboxName(),
                                   "--backend", Variable(profile, "backend"), "--accel", Variable(profile, "accel"),
                                   "-v", payload_dir + ":" + kPayloadTarget + ":ro"};
  if (std::string prewarm = Variable(profile, "prewarm"); !prewarm.empty()) argv.insert(argv.end(), {"--prewarm", prewarm});
  SMOLBOX_ASSIGN_OR_RETURN(auto created, RunCaptured(argv));
  if (created.exit_code != 0) {
    return std::unexpected(Error{"smolbox create", FirstLine(created.err), 0});
  }
  warm->smolbox_ = argv[0];
  warm->name_ = argv[2];
  return warm;
}

WarmSandbox::~WarmSandbox() {
  if (!name_.empty()) (void)RunCaptured({smolbox_, "rm", "--force", name_});
}

Expected<int64_t> WarmSandbox::Sample(const Profile& profile, const Case& c) const {
  std::vector<std::string> argv;
  if (!smolbox_.empty()) argv = {smolbox_, "exec", "--timeout", kExecTimeout, name_, "--"};
  auto interpreter = profile.interpreters.find(c.lang);
  if (interpreter != profile.interpreters.end()) argv.insert(argv.end(), interpreter->second.begin(), interpreter->second.end());
  auto relative = std::filesystem::path(c.payload).lexically_relative(payload_dir_);
  argv.push_back(smolbox_.empty() ? c.payload : fmt::format("{}/{}", kPayloadTarget, relative.string()));
  argv.insert(argv.end(), c.args.begin(), c.args.end());
  argv.push_back(name_.empty() ? "warm" : name_);  // the payloads take the runner's marker last
  // The environment a sandboxed workload gets, so that the bare interpreter does the same work
  // (the host's NODE_EXTRA_CA_CERTS alone costs node ~30 ms).
  CaptureOptions options;
  options.extra_env = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/tmp"};
  options.only_extra_env = true;
  auto start = std::chrono::steady_clock::now();
  auto run = RunCaptured(argv, options);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  SMOLBOX_TRY(run);
  if (run->exit_code != 0) {
    return std::unexpected(Error{"exit", fmt::format("{}: {}", run->exit_code, FirstLine(run->err)), 0});
  }
  for (const auto& text : c.expect.stdout_contains) {
    if (run->out.find(text) == std::string::npos) {
      return std::unexpected(Error{"stdout", fmt::format("lacks {:?}", text), 0});
    }
  }
  return ms;
}

}  // namespace smolvm_check
