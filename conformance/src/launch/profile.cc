#include "launch/profile.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <set>

#include "battery/json_check.h"
#include "battery/placeholders.h"
#include "launch/smolbox_install.h"

namespace smolvm_check {
namespace {

using nlohmann::json;

const std::vector<std::string> kMultiWord = {"argv...", "mounts...", "env...", "limits...",
                                             "stdin...", "user..."};
// smolbox:vm-tcg is the vm backend on QEMU's emulation, for hosts without KVM.
// A "-fresh" vm variant boots every guest from scratch: no boot snapshot (--no-snapshot).
const std::vector<std::string> kSmolboxBackends = {"ns", "auto", "vm", "vm-tcg", "vm-fresh", "vm-tcg-fresh"};
constexpr int64_t kTcgBootAllowanceMs = 6000;
constexpr int64_t kMaxStartupAllowanceMs = 60000;
// A profile is a page of command templates; today's largest is 2 KB.
constexpr size_t kMaxProfileBytes = 1 << 20;

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

// ---------------------------------------------------------------------------
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
                  Words{"env", &p.env}, Words{"stdin", &p.stdin_args},
                  Words{"unsupported", &p.unsupported}}) {
    if (!v.contains(w.key)) continue;
    SMOLBOX_ASSIGN_OR_RETURN(auto words, GetStringArray(v[w.key], w.key));
    *w.out = std::move(words);
  }
  return {};
}

Expected<void> ParseVariables(const json& v, Profile& p) {
  SMOLBOX_ASSIGN_OR_RETURN(auto vars, GetStringMap(v, "variables"));
  for (const auto& [name, value] : vars) {
    bool reserved = Contains(ScalarNames(Profile{}), name) || Contains(kMultiWord, name) ||
                    Contains({"source", "target", "key", "value"}, name);
    if (reserved || FindPlaceholders("{" + name + "}").size() != 1) {
      return Fail("variables", fmt::format("{:?} cannot be a variable name", name));
    }
    p.variables[name] = value;
  }
  return {};
}

Expected<void> ParseFields(const json& v, Profile& p) {
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
  return {};
}

// ---------------------------------------------------------------------------
// Validation

Expected<void> CheckTemplate(const std::vector<std::string>& words, const std::string& path,
                             const std::vector<std::string>& allowed, bool multi_word) {
  for (size_t i = 0; i < words.size(); ++i) {
    for (const PlaceholderRef& ref : FindPlaceholders(words[i])) {
      std::string field = IndexPath(path, i);
      bool multi = Contains(kMultiWord, ref.name);
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
  SMOLBOX_TRY(CheckTemplate(p.command, "command", scalars, true));
  for (const auto& [path, words] : plain) {
    bool mount = path.starts_with("mount.");
    if (auto ok = CheckTemplate(*words, path, mount ? with({"source", "target"}) : scalars, false);
        !ok) {
      return ok;
    }
  }
  SMOLBOX_TRY(CheckTemplate(p.env, "env", with({"key", "value"}), false));
  std::vector<std::string> variables;
  for (const auto& [name, unused] : p.variables) variables.push_back(name);
  if (auto ok = CheckTemplate(p.version_command, "version_command", variables, false); !ok) {
    return ok;
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
                      "user"}}) {
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

// binary and version_command name no case, so their variables are settled once, here.
Expected<void> ResolveVariables(Profile& p) {
  auto lookup = [&](const std::string& name) -> std::optional<std::string> {
    auto it = p.variables.find(name);
    if (it == p.variables.end()) return std::nullopt;
    return it->second;
  };
  auto binary = Substitute(p.binary, lookup);
  if (!binary) return std::unexpected(Within("binary", binary.error()));
  p.binary = *binary;
  for (size_t i = 0; i < p.version_command.size(); ++i) {
    auto word = Substitute(p.version_command[i], lookup);
    if (!word) return std::unexpected(Within(IndexPath("version_command", i), word.error()));
    p.version_command[i] = *word;
  }
  return {};
}

std::string ProfileLabel(const json& doc, const std::string& origin) {
  if (doc.is_object() && doc.contains("name") && doc["name"].is_string()) {
    return doc["name"].get<std::string>();
  }
  return origin;
}

// The fields as written, with the variables settled; no check across fields yet.
Expected<void> ReadProfile(const json& doc, const std::map<std::string, std::string>& overrides,
                           Profile& p) {
  if (auto ok = CheckKeys(doc, "",
                          {"name", "description", "binary", "install", "version_command", "command",
                           "mount", "env", "stdin", "limits", "limit_args", "unsupported", "paths",
                           "result", "syntax_only", "interpreters", "variables", "startup_allowance_ms",
                           "user"});
      !ok) {
    return ok;
  }
  for (const char* field : {"name", "command", "result"}) {
    if (!doc.contains(field)) return Fail(field, "is required");
  }
  auto name = GetString(doc["name"], "name");
  SMOLBOX_TRY(name);
  if (name->empty()) return Fail("name", "must not be empty");
  p.name = *name;
  SMOLBOX_TRY(ParseFields(doc, p));
  for (const auto& [key, value] : overrides) p.variables[key] = value;
  return ResolveVariables(p);
}

Expected<void> ValidateProfile(Profile& p) {
  for (auto check : {CheckTemplates, CheckExpansions, CheckLimitCoverage}) {
    SMOLBOX_TRY(check(p));
  }
  FillInterpreters(p);
  return {};
}

// between_steps runs once the fields are read and before they are checked against each other:
// a missing binary is the error a user can act on first.
Expected<Profile> ParseProfileWith(
    const std::string& json_text, const std::string& origin,
    const std::map<std::string, std::string>& overrides,
    const std::function<Expected<void>(const Profile&)>& between_steps = nullptr) {
  auto doc = ParseJsonText(json_text, {.max_bytes = kMaxProfileBytes});
  if (!doc) return std::unexpected(Within("profile " + origin, doc.error()));
  Profile profile;
  const std::string label = "profile " + ProfileLabel(*doc, origin);
  if (auto ok = ReadProfile(*doc, overrides, profile); !ok) {
    return std::unexpected(Within(label, ok.error()));
  }
  if (between_steps) {
    SMOLBOX_TRY(between_steps(profile));
  }
  if (auto ok = ValidateProfile(profile); !ok) return std::unexpected(Within(label, ok.error()));
  return profile;
}

// ---------------------------------------------------------------------------
// Loading

bool IsExecutable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

bool FoundOnPath(const std::string& binary) {
  if (binary.find('/') != std::string::npos) return IsExecutable(binary);
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = std::min(dirs.find(':', start), dirs.size());
    std::string dir = end > start ? dirs.substr(start, end - start) : ".";
    if (IsExecutable(dir + "/" + binary)) return true;
    start = end + 1;
  }
  return false;
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

// ---------------------------------------------------------------------------
// Rendering

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
  if (!profile.host_paths) {
    if (auto ok = add(profile.mount_ro, placement.payload_dir, kPayloadTarget); !ok) {
      return std::unexpected(ok.error());
    }
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
  if (c.stdin_data) return Expand(profile.stdin_args, values);
  return std::vector<std::string>{};
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

Expected<Profile> ParseProfile(const std::string& json_text, const std::string& origin) {
  return ParseProfileWith(json_text, origin, {});
}

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
        refs.size() == 1 && refs[0].size == word.size() && Contains(kMultiWord, refs[0].name);
    auto words =
        multi ? MultiWord(refs[0].name, profile, c, placement, values) : Expand({word}, values);
    if (!words) return std::unexpected(Within(where, words.error()));
    out->insert(out->end(), words->begin(), words->end());
  }
  return out;
}

bool RunsAsCaseUser(const Profile& profile, const Case& c) {
  return c.user == "sandbox" || profile.user_args.contains(c.user);
}

std::vector<std::string> UnsupportedLimits(const Profile& profile, const Case& c) {
  std::vector<std::string> out;
  for (const std::string& name : kLimitNames) {
    if (c.limits.contains(name) && Contains(profile.unsupported, name)) out.push_back(name);
  }
  return out;
}

}  // namespace smolvm_check
