// A profile's setup and teardown: commands run once around a battery or a bench, for a sandbox
// that needs something running first (docker's profile starts a daemon of its own and loads its
// image). The teardown runs whenever the setup was tried, even when it failed half-way, so it
// must stop only what is there.
//
//   auto setup = ProfileSetup::Start(profile);  // runs "setup"; the error names it
//   if (!setup) return usage_error(setup.error());
//   ... run the cases ...
//   // ~ProfileSetup runs "teardown"; a failure there is printed, not thrown
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launch/profile.h"

namespace smolvm_check {

class ProfileSetup {
 public:
  // Runs the profile's setup (nothing for a profile without one, or a syntax-only one). A
  // failed setup is an error naming the field, the exit code and the end of what it printed;
  // the teardown has run by then.
  static Expected<ProfileSetup> Start(const Profile& profile);
  ~ProfileSetup();
  ProfileSetup(ProfileSetup&& other) noexcept;
  ProfileSetup& operator=(ProfileSetup&&) = delete;
  ProfileSetup(const ProfileSetup&) = delete;
  ProfileSetup& operator=(const ProfileSetup&) = delete;

 private:
  explicit ProfileSetup(std::vector<std::string> teardown) : teardown_(std::move(teardown)) {}
  std::vector<std::string> teardown_;  // empty: nothing to run
};

}  // namespace smolvm_check
