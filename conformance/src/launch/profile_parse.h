// Between the profile's three parts: the parser (profile_parse.cc), which reads and checks a
// profile, the loader (profile_load.cc), which finds one by sandbox name and has the parser
// settle its variables and variant, and the renderer (profile_render.cc), which expands it for
// a case.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "launch/profile.h"

namespace smolvm_check {

// The placeholders that expand to several words, each only as a whole word of "command".
// {variant...} is settled when the profile is parsed; the others when it is rendered for a case.
inline const std::vector<std::string> kMultiWordPlaceholders = {
    "argv...", "mounts...", "env...", "limits...", "stdin...", "user...", "egress...", "variant..."};

// The variable every profile has: the directory of its file, for a setup script kept beside it.
inline constexpr const char* kProfileDirVariable = "profile_dir";

// A profile is a page of command templates; today's largest is 2 KB.
inline constexpr size_t kMaxProfileBytes = 1 << 20;

// What the loader sets in a profile as it is parsed: values for its variables, and the words
// that {variant...} in its command stands for (none for a profile parsed on its own).
struct ProfileSettings {
  std::map<std::string, std::string> variables;
  std::vector<std::string> variant_words;
  // What the user set (smolvm-check's --var), after the loader's: each must be a variable the
  // profile declares.
  std::map<std::string, std::string> overrides;
};

// The profile in json_text, with settings applied before its variables are settled.
// between_steps runs once the fields are read and before they are checked against each other:
// a missing binary is the error a user can act on first.
Expected<Profile> ParseProfileWith(
    const std::string& json_text, const std::string& origin, const ProfileSettings& settings,
    const std::function<Expected<void>(const Profile&)>& between_steps = nullptr);

}  // namespace smolvm_check
