// Reading a profile: its fields as written, each checked for its type, then the checks across
// fields (every placeholder known, every multi-word one where it can expand, every limit mapped
// or declared unsupported).
#include "launch/profile_parse.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include "battery/json_check.h"
#include "battery/placeholders.h"
#include "launch/http_profile.h"

namespace smolvm_check {
namespace {

using nlohmann::json;

constexpr int64_t kMaxStartupAllowanceMs = 60000;

bool Contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

std::unexpected<Error> Fail(std::string field, std::string reason) {
  return std::unexpected(Error::Field(std::move(field), std::move(reason)));
}

// Placeholders every template may use; the values come from the case and the variables.
std::vector<std::string> ScalarNames(const Profile& profile) {
  std::vector<std::string> names = kLimitNames;
  names.insert(names.end(), {"workdir", "timeout_s", "vcpus"});
  for (const auto& [name, unused] : profile.variables) names.push_back(name);
  return names;
}

// ---------------------------------------------------------------------------------------------
// Parsing

Expected<std::map<std::string, std::vector<std::string>>> GetLimitTemplates(
    const json& v, const std::string& path) {
  if (!v.is_object()) return Fail(path, "must be an object of limit name -> words");
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& [name, words] : v.items()) {
    if (!Contains(kLimitNames, name)) return Fail(path, fmt::format("unknown limit {:?}", name));
    SMOLBOX_ASSIGN_OR_RETURN(auto parsed, GetStringArray(words, FieldPath(path, name)));
    out.emplace(name, std::move(parsed));
  }
  return out;
}

Expected<void> ParseUserTemplates(const json& v, Profile& p) {
  if (!v.is_object()) return Fail("user", "must be an object of case user -> words");
  for (const auto& [user, words] : v.items()) {
    if (!Contains(kCaseUsers, user)) {
      return Fail("user", fmt::format("unknown user {:?} (expected one of {})", user, fmt::join(kCaseUsers, ", ")));
    }
    SMOLBOX_ASSIGN_OR_RETURN(auto parsed, GetStringArray(words, FieldPath("user", user)));
    p.user_args.emplace(user, std::move(parsed));
  }
  return {};
}

Expected<void> ParseMountTemplates(const json& v, Profile& p) {
  SMOLBOX_TRY(CheckKeys(v, "mount", {"ro", "rw"}));
  if (!v.contains("ro") || !v.contains("rw")) return Fail("mount", "needs both ro and rw");
  SMOLBOX_ASSIGN_OR_RETURN(auto ro, GetStringArray(v["ro"], "mount.ro"));
  SMOLBOX_ASSIGN_OR_RETURN(auto rw, GetStringArray(v["rw"], "mount.rw"));
  p.mount_ro = std::move(ro);
  p.mount_rw = std::move(rw);
  return {};
}

Expected<void> ParseEgressTemplates(const json& v, Profile& p) {
  SMOLBOX_TRY(CheckKeys(v, "egress", {"net", "allow_host", "allow_cidr", "deny_cidr", "net_limit", "ca_bundle"}));
  EgressTemplates egress;
  for (auto [key, out] : {std::pair{"net", &egress.net}, std::pair{"allow_host", &egress.allow_host},
                          std::pair{"allow_cidr", &egress.allow_cidr}}) {
    if (!v.contains(key)) return Fail(FieldPath("egress", key), "is required (an empty list says nothing is needed)");
    SMOLBOX_ASSIGN_OR_RETURN(auto words, GetStringArray(v[key], FieldPath("egress", key)));
    *out = std::move(words);
  }
  // Optional: most sandboxes have no deny rule, byte cap or CA flag, and their cases skip there.
  for (auto [key, out] : {std::pair{"deny_cidr", &egress.deny_cidr}, std::pair{"net_limit", &egress.net_limit},
                          std::pair{"ca_bundle", &egress.ca_bundle}}) {
    if (!v.contains(key)) continue;
    SMOLBOX_ASSIGN_OR_RETURN(auto words, GetStringArray(v[key], FieldPath("egress", key)));
    *out = std::move(words);
  }
  p.egress = std::move(egress);
  return {};
}

Expected<void> ParseInterpreters(const json& v, Profile& p) {
  if (!v.is_object()) return Fail("interpreters", "must be an object of lang -> words");
  for (const auto& [lang, words] : v.items()) {
    if (!Contains({"python", "js", "sh"}, lang)) {
      return Fail("interpreters", fmt::format("unknown lang {:?}", lang));
    }
    SMOLBOX_ASSIGN_OR_RETURN(auto parsed, GetStringArray(words, FieldPath("interpreters", lang)));
    if (parsed.empty()) return Fail(FieldPath("interpreters", lang), "must not be empty");
    p.interpreters[lang] = std::move(parsed);
  }
  return {};
}

Expected<void> ParseEnums(const json& v, Profile& p) {
  if (v.contains("paths")) {
    auto paths = GetString(v["paths"], "paths");
    SMOLBOX_TRY(paths);
    if (*paths != "sandbox" && *paths != "host") {
      return Fail("paths", fmt::format("must be sandbox or host (got {:?})", *paths));
    }
    p.host_paths = *paths == "host";
  }
  auto result = GetString(v["result"], "result");
  SMOLBOX_TRY(result);
  if (*result != "exit_code" && *result != "smolbox_json") {
    return Fail("result", fmt::format("must be exit_code or smolbox_json (got {:?})", *result));
  }
  p.smolbox_json = *result == "smolbox_json";
  if (v.contains("syntax_only")) {
    SMOLBOX_ASSIGN_OR_RETURN(auto flag, GetBool(v["syntax_only"], "syntax_only"));
    p.syntax_only = flag;
  }
  if (v.contains("startup_allowance_ms")) {
    const json& ms = v["startup_allowance_ms"];
    if (!ms.is_number_unsigned() || ms.get<int64_t>() > kMaxStartupAllowanceMs) {
      return Fail("startup_allowance_ms", fmt::format("must be a whole number of ms from 0 to {}", kMaxStartupAllowanceMs));
    }
    p.startup_allowance_ms = ms.get<int64_t>();
  }
  return {};
}

// The optional fields that hold one string or a list of words.
Expected<void> ParseWords(const json& v, Profile& p) {
  struct Text {
    const char* key;
    std::string* out;
  };
  for (Text t : {Text{"description", &p.description}, Text{"binary", &p.binary},
                 Text{"install", &p.install_hint}}) {
    if (!v.contains(t.key)) continue;
    SMOLBOX_ASSIGN_OR_RETURN(auto text, GetString(v[t.key], t.key));
    *t.out = std::move(text);
  }
  struct Words {
    const char* key;
    std::vector<std::string>* out;
  };
  for (Words w : {Words{"command", &p.command}, Words{"version_command", &p.version_command},
                  Words{"setup", &p.setup}, Words{"teardown", &p.teardown}, Words{"env", &p.env},
                  Words{"stdin", &p.stdin_args}, Words{"unsupported", &p.unsupported}}) {
    if (!v.contains(w.key)) continue;
    SMOLBOX_ASSIGN_OR_RETURN(auto words, GetStringArray(v[w.key], w.key));
    *w.out = std::move(words);
  }
  return {};
}

Expected<void> ParseVariables(const json& v, Profile& p) {
  SMOLBOX_ASSIGN_OR_RETURN(auto vars, GetStringMap(v, "variables"));
  for (const auto& [name, value] : vars) {
    bool reserved = Contains(ScalarNames(Profile{}), name) || Contains(kMultiWordPlaceholders, name) ||
                    Contains({"source", "target", "key", "value", kProfileDirVariable}, name) ||
                    IsHttpPlaceholder(name);
    if (reserved || FindPlaceholders("{" + name + "}").size() != 1) {
      return Fail("variables", fmt::format("{:?} cannot be a variable name", name));
    }
    p.variables[name] = value;
  }
  return {};
}

// An http profile (launch/http_profile.h): the common fields, then its own.
Expected<void> ParseHttpProfileFields(const json& v, Profile& p) {
  SMOLBOX_TRY(ParseWords(v, p));
  SMOLBOX_TRY(ParseEnums(v, p));
  if (p.host_paths) return Fail("paths", "an http profile's sandbox has paths of its own");
  if (v.contains("interpreters")) {
    SMOLBOX_TRY(ParseInterpreters(v["interpreters"], p));
  }
  if (v.contains("variables")) {
    SMOLBOX_TRY(ParseVariables(v["variables"], p));
  }
  return ParseHttpFields(v, p);
}

Expected<void> ParseFields(const json& v, Profile& p) {
  if (v.contains("kind")) {
    SMOLBOX_ASSIGN_OR_RETURN(auto kind, GetString(v["kind"], "kind"));
    if (kind == "http") return ParseHttpProfileFields(v, p);
    if (kind != "command") return Fail("kind", fmt::format("must be command or http (got {:?})", kind));
  }
  for (const char* field : {"endpoint", "server", "calls", "result_fields"}) {
    if (v.contains(field)) return Fail(field, "belongs to an http profile (\"kind\": \"http\")");
  }
  if (!v.contains("command")) return Fail("command", "is required");
  SMOLBOX_TRY(ParseWords(v, p));
  SMOLBOX_TRY(ParseEnums(v, p));
  if (v.contains("mount")) {
    SMOLBOX_TRY(ParseMountTemplates(v["mount"], p));
  }
  for (auto [key, out] :
       {std::pair{"limits", &p.limit_wrappers}, std::pair{"limit_args", &p.limit_args}}) {
    if (!v.contains(key)) continue;
    SMOLBOX_ASSIGN_OR_RETURN(auto templates, GetLimitTemplates(v[key], key));
    *out = std::move(templates);
  }
  if (v.contains("interpreters")) {
    SMOLBOX_TRY(ParseInterpreters(v["interpreters"], p));
  }
  if (v.contains("variables")) {
    SMOLBOX_TRY(ParseVariables(v["variables"], p));
  }
  if (v.contains("user")) {
    SMOLBOX_TRY(ParseUserTemplates(v["user"], p));
  }
  if (v.contains("egress")) {
    SMOLBOX_TRY(ParseEgressTemplates(v["egress"], p));
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// Validation

Expected<void> CheckTemplate(const std::vector<std::string>& words, const std::string& path,
                             const std::vector<std::string>& allowed, bool multi_word) {
  for (size_t i = 0; i < words.size(); ++i) {
    for (const PlaceholderRef& ref : FindPlaceholders(words[i])) {
      std::string field = IndexPath(path, i);
      bool multi = Contains(kMultiWordPlaceholders, ref.name);
      if (multi && multi_word && ref.size != words[i].size()) {
        return Fail(field, fmt::format("{{{}}} must be a word of its own", ref.name));
      }
      if ((multi && !multi_word) || (!multi && !Contains(allowed, ref.name))) {
        return Fail(field, fmt::format("unknown placeholder {{{}}}", ref.name));
      }
    }
  }
  return {};
}

Expected<void> CheckTemplates(const Profile& p) {
  std::vector<std::string> scalars = ScalarNames(p);
  auto with = [&](std::initializer_list<std::string> extra) {
    std::vector<std::string> names = scalars;
    names.insert(names.end(), extra);
    return names;
  };
  std::vector<std::pair<std::string, const std::vector<std::string>*>> plain = {
      {"mount.ro", &p.mount_ro}, {"mount.rw", &p.mount_rw}, {"stdin", &p.stdin_args}};
  for (const auto& [name, words] : p.limit_wrappers) plain.emplace_back("limits." + name, &words);
  for (const auto& [name, words] : p.limit_args) plain.emplace_back("limit_args." + name, &words);
  for (const auto& [name, words] : p.user_args) plain.emplace_back("user." + name, &words);
  if (p.egress) plain.emplace_back("egress.net", &p.egress->net);
  SMOLBOX_TRY(CheckTemplate(p.command, "command", scalars, true));
  for (const auto& [path, words] : plain) {
    bool mount = path.starts_with("mount.");
    if (auto ok = CheckTemplate(*words, path, mount ? with({"source", "target"}) : scalars, false);
        !ok) {
      return ok;
    }
  }
  SMOLBOX_TRY(CheckTemplate(p.env, "env", with({"key", "value"}), false));
  if (p.egress) {
    SMOLBOX_TRY(CheckTemplate(p.egress->allow_host, "egress.allow_host", with({"host"}), false));
    SMOLBOX_TRY(CheckTemplate(p.egress->allow_cidr, "egress.allow_cidr", with({"cidr"}), false));
    SMOLBOX_TRY(CheckTemplate(p.egress->deny_cidr, "egress.deny_cidr", with({"cidr"}), false));
    SMOLBOX_TRY(CheckTemplate(p.egress->net_limit, "egress.net_limit", with({"bytes"}), false));
    SMOLBOX_TRY(CheckTemplate(p.egress->ca_bundle, "egress.ca_bundle", with({"path"}), false));
  }
  std::vector<std::string> variables;
  for (const auto& [name, unused] : p.variables) variables.push_back(name);
  for (auto [path, words] : {std::pair{"version_command", &p.version_command}, std::pair{"setup", &p.setup},
                             std::pair{"teardown", &p.teardown}}) {
    SMOLBOX_TRY(CheckTemplate(*words, path, variables, false));
  }
  return CheckTemplate({p.binary}, "binary", variables, false);
}

size_t CountWord(const std::vector<std::string>& words, const std::string& word) {
  return static_cast<size_t>(std::count(words.begin(), words.end(), word));
}

// Each multi-word placeholder and the template it expands.
Expected<void> CheckExpansions(const Profile& p) {
  if (CountWord(p.command, "{argv...}") != 1) {
    return Fail("command", "needs {argv...} exactly once");
  }
  struct Pair {
    const char* word;
    bool has_template;
    const char* field;
  };
  for (Pair x : {Pair{"{mounts...}", !p.mount_ro.empty() || !p.mount_rw.empty(), "mount"},
                 Pair{"{env...}", !p.env.empty(), "env"},
                 Pair{"{limits...}", !p.limit_args.empty(), "limit_args"},
                 Pair{"{stdin...}", !p.stdin_args.empty(), "stdin"},
                 Pair{"{user...}", std::any_of(p.user_args.begin(), p.user_args.end(),
                                               [](const auto& u) { return !u.second.empty(); }),
                      "user"},
                 Pair{"{egress...}",
                      p.egress && (!p.egress->net.empty() || !p.egress->allow_host.empty() ||
                                   !p.egress->allow_cidr.empty() || !p.egress->ca_bundle.empty()),
                      "egress"}}) {
    size_t uses = CountWord(p.command, x.word);
    if (uses > 1) return Fail("command", fmt::format("uses {} more than once", x.word));
    if (uses == 1 && !x.has_template) {
      return Fail("command", fmt::format("uses {} without {:?}", x.word, x.field));
    }
    if (uses == 0 && x.has_template) {
      return Fail(x.field, fmt::format("is set but command has no {}", x.word));
    }
  }
  // A sandbox whose paths are its own needs the case's mounts and env passed in; on the host
  // they are there already (the runner sets the env of the launch).
  if (!p.host_paths && (p.mount_ro.empty() || p.mount_rw.empty())) {
    return Fail("mount", "is required unless paths is host");
  }
  if (!p.host_paths && p.env.empty()) return Fail("env", "is required unless paths is host");
  return {};
}

bool CommandUses(const Profile& p, const std::string& name) {
  for (const std::string& word : p.command) {
    for (const PlaceholderRef& ref : FindPlaceholders(word)) {
      if (ref.name == name || (name == "timeout_ms" && ref.name == "timeout_s") ||
          (name == "cpus" && ref.name == "vcpus")) {
        return true;
      }
    }
  }
  return false;
}

// Every limit is either enforced somehow or honestly declared unsupported, never both.
Expected<void> CheckLimitCoverage(const Profile& p) {
  for (size_t i = 0; i < p.unsupported.size(); ++i) {
    if (!Contains(kLimitNames, p.unsupported[i])) {
      return Fail(IndexPath("unsupported", i), fmt::format("unknown limit {:?}", p.unsupported[i]));
    }
  }
  for (const std::string& name : kLimitNames) {
    int ways = static_cast<int>(p.limit_wrappers.contains(name)) +
               static_cast<int>(p.limit_args.contains(name)) +
               static_cast<int>(CommandUses(p, name));
    bool unsupported = Contains(p.unsupported, name);
    if (ways == 0 && !unsupported) {
      return Fail("unsupported",
                  fmt::format("limit {:?} is neither mapped nor declared unsupported", name));
    }
    if (ways > 0 && unsupported) {
      return Fail("unsupported",
                  fmt::format("limit {:?} is both mapped and declared unsupported", name));
    }
  }
  return {};
}

void FillInterpreters(Profile& p) {
  static const std::map<std::string, std::vector<std::string>> kDefaults = {
      // -u: a payload killed at its limit has still printed its evidence.
      {"python", {"/usr/bin/python3", "-u"}},
      {"js", {"/usr/bin/node"}},
      {"sh", {"/bin/sh"}}};
  for (const auto& [lang, words] : kDefaults) p.interpreters.try_emplace(lang, words);
}

// binary, version_command, setup and teardown name no case, so their variables are settled
// once, here.
Expected<void> ResolveVariables(Profile& p) {
  auto lookup = [&](const std::string& name) -> std::optional<std::string> {
    auto it = p.variables.find(name);
    if (it == p.variables.end()) return std::nullopt;
    return it->second;
  };
  auto binary = Substitute(p.binary, lookup);
  if (!binary) return std::unexpected(Within("binary", binary.error()));
  p.binary = *binary;
  for (auto [path, words] : {std::pair{"version_command", &p.version_command}, std::pair{"setup", &p.setup},
                             std::pair{"teardown", &p.teardown}}) {
    for (size_t i = 0; i < words->size(); ++i) {
      auto word = Substitute((*words)[i], lookup);
      if (!word) return std::unexpected(Within(IndexPath(path, i), word.error()));
      (*words)[i] = *word;
    }
  }
  return {};
}

std::string ProfileLabel(const json& doc, const std::string& origin) {
  if (doc.is_object() && doc.contains("name") && doc["name"].is_string()) {
    return doc["name"].get<std::string>();
  }
  return origin;
}

// {variant...} names no case either: the loader's words for it take its place in the command.
Expected<void> SettleVariant(Profile& p, const std::vector<std::string>& words) {
  auto at = std::find(p.command.begin(), p.command.end(), "{variant...}");
  if (at == p.command.end()) return {};
  if (std::find(at + 1, p.command.end(), "{variant...}") != p.command.end()) {
    return Fail("command", "uses {variant...} more than once");
  }
  at = p.command.erase(at);
  p.command.insert(at, words.begin(), words.end());
  return {};
}

// The fields as written, with the variables and the variant settled; no check across fields yet.
Expected<void> ReadProfile(const json& doc, const std::string& origin, const ProfileSettings& settings,
                           Profile& p) {
  if (auto ok = CheckKeys(doc, "",
                          {"name", "description", "binary", "install", "version_command", "command",
                           "mount", "env", "stdin", "limits", "limit_args", "unsupported", "paths",
                           "result", "syntax_only", "interpreters", "variables", "startup_allowance_ms",
                           "user", "egress", "setup", "teardown", "kind", "endpoint", "server", "calls",
                           "result_fields"});
      !ok) {
    return ok;
  }
  for (const char* field : {"name", "result"}) {
    if (!doc.contains(field)) return Fail(field, "is required");
  }
  auto name = GetString(doc["name"], "name");
  SMOLBOX_TRY(name);
  if (name->empty()) return Fail("name", "must not be empty");
  p.name = *name;
  SMOLBOX_TRY(ParseFields(doc, p));
  // Where a setup's script next to the profile is found.
  std::error_code ec;
  p.variables[kProfileDirVariable] = std::filesystem::absolute(origin, ec).parent_path().string();
  for (const auto& [key, value] : settings.variables) p.variables[key] = value;
  for (const auto& [key, value] : settings.overrides) {
    if (!p.variables.contains(key)) {
      std::string declared;
      for (const auto& [declared_name, _] : p.variables) declared += (declared.empty() ? "" : ", ") + declared_name;
      return std::unexpected(Error::Field("--var " + key, fmt::format("the profile has no variable {{{}}} (it has: {})", key,
                                                                      declared.empty() ? "none" : declared)));
    }
    p.variables[key] = value;
  }
  SMOLBOX_TRY(SettleVariant(p, settings.variant_words));
  return ResolveVariables(p);
}

Expected<void> ValidateProfile(Profile& p) {
  if (p.http) {
    SMOLBOX_TRY(ValidateHttpProfile(p));
    FillInterpreters(p);
    return {};
  }
  for (auto check : {CheckTemplates, CheckExpansions, CheckLimitCoverage}) {
    SMOLBOX_TRY(check(p));
  }
  FillInterpreters(p);
  return {};
}

}  // namespace

Expected<Profile> ParseProfileWith(
    const std::string& json_text, const std::string& origin, const ProfileSettings& settings,
    const std::function<Expected<void>(const Profile&)>& between_steps) {
  auto doc = ParseJsonText(json_text, {.max_bytes = kMaxProfileBytes});
  if (!doc) return std::unexpected(Within("profile " + origin, doc.error()));
  Profile profile;
  const std::string label = "profile " + ProfileLabel(*doc, origin);
  if (auto ok = ReadProfile(*doc, origin, settings, profile); !ok) {
    return std::unexpected(Within(label, ok.error()));
  }
  if (between_steps) {
    SMOLBOX_TRY(between_steps(profile));
  }
  if (auto ok = ValidateProfile(profile); !ok) return std::unexpected(Within(label, ok.error()));
  return profile;
}

Expected<Profile> ParseProfile(const std::string& json_text, const std::string& origin) {
  return ParseProfileWith(json_text, origin, {});
}

}  // namespace smolvm_check
