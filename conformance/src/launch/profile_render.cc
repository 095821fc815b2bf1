// Rendering a profile for one case: the limit wrappers, then the command with every placeholder
// expanded from the case, where it is placed on the host and the profile's variables.
#include "launch/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <tuple>

#include "battery/json_check.h"
#include "battery/placeholders.h"
#include "launch/profile_parse.h"

namespace smolvm_check {
namespace {

bool Contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

std::unexpected<Error> Fail(std::string field, std::string reason) {
  return std::unexpected(Error::Field(std::move(field), std::move(reason)));
}

std::string FormatMilliCpus(int64_t milli) {
  std::string text = fmt::format("{}.{:03}", milli / 1000, milli % 1000);
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return text;
}

std::map<std::string, std::string> ScalarValues(const Profile& profile, const Case& c,
                                                const Placement& placement) {
  std::map<std::string, std::string> values = profile.variables;
  for (const std::string& name : kLimitNames) {
    int64_t value = c.Limit(name);
    values[name] = name == "cpus" ? FormatMilliCpus(value) : std::to_string(value);
  }
  values["timeout_s"] = std::to_string((c.Limit("timeout_ms") + 999) / 1000);
  values["vcpus"] = std::to_string(std::max<int64_t>(1, (c.Limit("cpus") + 999) / 1000));
  values["workdir"] = profile.host_paths ? placement.workdir_host : kSandboxWorkdir;
  return values;
}

using Values = std::map<std::string, std::string>;

Expected<std::vector<std::string>> Expand(const std::vector<std::string>& words,
                                          const Values& values, const Values& extra = {}) {
  auto lookup = [&](const std::string& name) -> std::optional<std::string> {
    if (auto it = extra.find(name); it != extra.end()) return it->second;
    if (auto it = values.find(name); it != values.end()) return it->second;
    return std::nullopt;
  };
  std::vector<std::string> out;
  for (size_t i = 0; i < words.size(); ++i) {
    auto word = Substitute(words[i], lookup);
    if (!word) return std::unexpected(Within(IndexPath("word", i), word.error()));
    out.push_back(std::move(*word));
  }
  return out;
}

Expected<std::string> PayloadPath(const Profile& profile, const Case& c,
                                  const Placement& placement) {
  if (profile.host_paths) return c.payload;
  auto relative = std::filesystem::path(c.payload).lexically_relative(placement.payload_dir);
  if (relative.empty() || *relative.begin() == "..") {
    return Fail("payload", fmt::format("{} is not under the payload directory {}", c.payload,
                                       placement.payload_dir));
  }
  return fmt::format("{}/{}", kPayloadTarget, relative.string());
}

Expected<std::string> MountPath(const Profile& profile, const Case& c, const Placement& placement,
                                const std::string& name) {
  auto mount = std::find_if(c.mounts.begin(), c.mounts.end(),
                            [&](const CaseMount& m) { return m.name == name; });
  if (mount == c.mounts.end()) return Fail("", fmt::format("no mount named {:?}", name));
  if (!profile.host_paths) return mount->target;
  auto source = placement.mount_sources.find(name);
  if (source == placement.mount_sources.end()) {
    return Fail("", fmt::format("mount {:?} has no host directory", name));
  }
  return source->second;
}

Expected<std::string> ExpandArg(const Profile& profile, const Case& c, const Placement& placement,
                                const std::string& arg) {
  std::optional<Error> failure;
  auto lookup = [&](const std::string& name) -> std::optional<std::string> {
    if (name == "workdir") return profile.host_paths ? placement.workdir_host : kSandboxWorkdir;
    if (name.starts_with("mount:")) {
      auto path = MountPath(profile, c, placement, name.substr(6));
      if (!path) failure = path.error();
      return path ? std::optional(*path) : std::nullopt;
    }
    for (const std::string& key : {name, "{" + name + "}"}) {
      if (auto it = placement.hints.find(key); it != placement.hints.end()) return it->second;
    }
    return std::nullopt;
  };
  auto word = Substitute(arg, lookup);
  if (failure) return std::unexpected(*failure);
  return word;
}

Expected<std::vector<std::string>> ArgvWords(const Profile& profile, const Case& c,
                                             const Placement& placement) {
  auto interpreter = profile.interpreters.find(c.lang);
  std::vector<std::string> argv;
  if (interpreter != profile.interpreters.end()) argv = interpreter->second;
  SMOLBOX_ASSIGN_OR_RETURN(auto payload, PayloadPath(profile, c, placement));
  argv.push_back(payload);
  for (size_t i = 0; i < c.args.size(); ++i) {
    auto arg = ExpandArg(profile, c, placement, c.args[i]);
    if (!arg) return std::unexpected(Within(IndexPath("args", i), arg.error()));
    argv.push_back(std::move(*arg));
  }
  if (!placement.marker.empty()) argv.push_back(placement.marker);
  return argv;
}

Expected<std::vector<std::string>> MountWords(const Profile& profile, const Case& c,
                                              const Placement& placement, const Values& values) {
  std::vector<std::string> out;
  auto add = [&](const std::vector<std::string>& words, const std::string& source,
                 const std::string& target) -> Expected<void> {
    SMOLBOX_ASSIGN_OR_RETURN(auto expanded, Expand(words, values, {{"source", source}, {"target", target}}));
    out.insert(out.end(), expanded.begin(), expanded.end());
    return {};
  };
  std::string payload_target = profile.host_paths ? placement.payload_dir : std::string(kPayloadTarget);
  if (auto ok = add(profile.mount_ro, placement.payload_dir, payload_target); !ok) {
    return std::unexpected(ok.error());
  }
  for (const CaseMount& m : c.mounts) {
    auto source = placement.mount_sources.find(m.name);
    if (source == placement.mount_sources.end()) {
      return Fail("mounts", fmt::format("mount {:?} has no host directory", m.name));
    }
    const std::string& target = profile.host_paths ? source->second : m.target;
    if (auto ok = add(m.read_only ? profile.mount_ro : profile.mount_rw, source->second, target);
        !ok) {
      return std::unexpected(ok.error());
    }
  }
  return out;
}

Expected<std::vector<std::string>> EnvWords(const Profile& profile, const Case& c,
                                            const Values& values) {
  std::vector<std::string> out;
  for (const auto& [key, value] : c.env) {
    SMOLBOX_ASSIGN_OR_RETURN(auto expanded, Expand(profile.env, values, {{"key", key}, {"value", value}}));
    out.insert(out.end(), expanded.begin(), expanded.end());
  }
  return out;
}

Expected<std::vector<std::string>> LimitWords(const Profile& profile, const Case& c,
                                              const Values& values) {
  std::vector<std::string> out;
  for (const auto& [name, unused] : c.limits) {
    auto words = profile.limit_args.find(name);
    if (words == profile.limit_args.end()) continue;
    SMOLBOX_ASSIGN_OR_RETURN(auto expanded, Expand(words->second, values));
    out.insert(out.end(), expanded.begin(), expanded.end());
  }
  return out;
}

Expected<std::vector<std::string>> EgressWords(const Profile& profile, const Case& c,
                                               const Placement& placement, const Values& values) {
  std::vector<std::string> out;
  if (!c.egress || !profile.egress) return out;
  auto add = [&](const std::vector<std::string>& words, Values extra) -> Expected<void> {
    SMOLBOX_ASSIGN_OR_RETURN(auto expanded, Expand(words, values, std::move(extra)));
    out.insert(out.end(), expanded.begin(), expanded.end());
    return {};
  };
  if (c.egress->net) SMOLBOX_TRY(add(profile.egress->net, {}));
  for (const std::string& host : c.egress->allow_host) SMOLBOX_TRY(add(profile.egress->allow_host, {{"host", host}}));
  for (const std::string& cidr : c.egress->allow_cidr) SMOLBOX_TRY(add(profile.egress->allow_cidr, {{"cidr", cidr}}));
  for (const std::string& cidr : c.egress->deny_cidr) SMOLBOX_TRY(add(profile.egress->deny_cidr, {{"cidr", cidr}}));
  if (c.egress->net_limit) {
    SMOLBOX_TRY(add(profile.egress->net_limit, {{"bytes", std::to_string(*c.egress->net_limit)}}));
  }
  if (c.egress->trust_test_ca) SMOLBOX_TRY(add(profile.egress->ca_bundle, {{"path", placement.test_ca_path}}));
  return out;
}

Expected<std::vector<std::string>> MultiWord(const std::string& name, const Profile& profile,
                                             const Case& c, const Placement& placement,
                                             const Values& values) {
  if (name == "argv...") return ArgvWords(profile, c, placement);
  if (name == "mounts...") return MountWords(profile, c, placement, values);
  if (name == "env...") return EnvWords(profile, c, values);
  if (name == "limits...") return LimitWords(profile, c, values);
  if (name == "user...") {
    auto words = profile.user_args.find(c.user);
    return words == profile.user_args.end() ? std::vector<std::string>{} : Expand(words->second, values);
  }
  if (name == "stdin..." && c.stdin_data) return Expand(profile.stdin_args, values);
  if (name == "egress...") return EgressWords(profile, c, placement, values);
  return std::vector<std::string>{};  // no stdin; {variant...} was settled by the parser
}

Expected<std::vector<std::string>> WrapperWords(const Profile& profile, const Case& c,
                                                const Values& values) {
  std::vector<std::string> out;
  for (const auto& [name, words] : profile.limit_wrappers) {
    if (c.Limit(name) <= 0) continue;  // cpu_ms: no limit unless the case sets one
    auto expanded = Expand(words, values);
    if (!expanded) return std::unexpected(Within(FieldPath("limits", name), expanded.error()));
    out.insert(out.end(), expanded->begin(), expanded->end());
  }
  return out;
}

}  // namespace

Expected<std::vector<std::string>> RenderCommand(const Profile& profile, const Case& c,
                                                 const Placement& placement) {
  const std::string where = fmt::format("case {:?} under profile {}", c.id, profile.name);
  Values values = ScalarValues(profile, c, placement);
  auto out = WrapperWords(profile, c, values);
  if (!out) return std::unexpected(Within(where, out.error()));
  for (size_t i = 0; i < profile.command.size(); ++i) {
    const std::string& word = profile.command[i];
    auto refs = FindPlaceholders(word);
    bool multi =
        refs.size() == 1 && refs[0].size == word.size() && Contains(kMultiWordPlaceholders, refs[0].name);
    auto words =
        multi ? MultiWord(refs[0].name, profile, c, placement, values) : Expand({word}, values);
    if (!words) return std::unexpected(Within(where, words.error()));
    out->insert(out->end(), words->begin(), words->end());
  }
  return out;
}

Expected<std::vector<std::string>> CaseArgv(const Profile& profile, const Case& c, const Placement& placement) {
  return ArgvWords(profile, c, placement);
}

bool RunsAsCaseUser(const Profile& profile, const Case& c) {
  return c.user == "sandbox" || profile.user_args.contains(c.user);
}

std::optional<std::string> CannotExpressEgress(const Profile& profile, const Case& c) {
  if (!c.egress) return std::nullopt;
  if (!profile.egress) {
    return fmt::format("profile {} cannot express an egress policy (it has no \"egress\" field)", profile.name);
  }
  // A profile that can say nothing at all (null) runs the case as it is: open, and so failing.
  const EgressTemplates& t = *profile.egress;
  bool says_nothing = t.net.empty() && t.allow_host.empty() && t.allow_cidr.empty();
  if (says_nothing) return std::nullopt;
  for (auto [needed, words, field] :
       {std::tuple{c.egress->net, &t.net, "net"}, std::tuple{!c.egress->allow_host.empty(), &t.allow_host, "allow_host"},
        std::tuple{!c.egress->allow_cidr.empty(), &t.allow_cidr, "allow_cidr"},
        std::tuple{!c.egress->deny_cidr.empty(), &t.deny_cidr, "deny_cidr"},
        std::tuple{c.egress->net_limit.has_value(), &t.net_limit, "net_limit"},
        std::tuple{c.egress->trust_test_ca, &t.ca_bundle, "trust_test_ca"}}) {
    if (needed && words->empty()) {
      return fmt::format("profile {} cannot express egress.{} (its \"egress\" field has no words for it)", profile.name, field);
    }
  }
  return std::nullopt;
}

std::vector<std::string> UnsupportedLimits(const Profile& profile, const Case& c) {
  std::vector<std::string> out;
  for (const std::string& name : kLimitNames) {
    if (c.limits.contains(name) && Contains(profile.unsupported, name)) out.push_back(name);
  }
  return out;
}

}  // namespace smolvm_check
