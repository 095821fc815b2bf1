#include "launch/profile_setup.h"

#include <fmt/format.h>

#include <cstdio>

#include "launch/subprocess.h"

namespace smolvm_check {
namespace {

// What a failed step printed, enough to act on: its last lines.
constexpr size_t kShownOutputBytes = 2000;

std::string Tail(const std::string& text) {
  std::string tail =
      text.size() > kShownOutputBytes ? text.substr(text.size() - kShownOutputBytes) : text;
  while (!tail.empty() && tail.back() == '\n') tail.pop_back();
  return tail;
}

// Runs one step to completion. Its stdout and stderr are read until closed, so a daemon it
// starts must not keep them: the step sends the daemon's output to a file of its own.
Expected<void> RunStep(const char* field, const std::vector<std::string>& argv) {
  auto ran = RunCaptured(argv);
  if (!ran) {
    return std::unexpected(Error::Field(
        field, fmt::format("{:?} could not start: {}", argv[0], ran.error().ToString())));
  }
  if (ran->exit_code != 0) {
    return std::unexpected(
        Error::Field(field, fmt::format("{:?} exited {}: {}", argv[0], ran->exit_code,
                                        Tail(ran->err.empty() ? ran->out : ran->err))));
  }
  return {};
}

}  // namespace

Expected<ProfileSetup> ProfileSetup::Start(const Profile& profile) {
  if (profile.syntax_only) return ProfileSetup({});
  ProfileSetup started(profile.teardown);
  if (!profile.setup.empty()) {
    // On failure, `started` goes out of scope and tears down what the setup got to.
    SMOLBOX_TRY(RunStep("setup", profile.setup));
  }
  return started;
}

ProfileSetup::ProfileSetup(ProfileSetup&& other) noexcept : teardown_(std::move(other.teardown_)) {
  other.teardown_.clear();
}

ProfileSetup::~ProfileSetup() {
  if (teardown_.empty()) return;
  if (auto ok = RunStep("teardown", teardown_); !ok) {
    fmt::print(stderr, "smolvm-check: warning: {}\n", ok.error().ToString());
  }
}

}  // namespace smolvm_check
