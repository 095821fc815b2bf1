#include "battery/catalog.h"

#include <fmt/format.h>
#include <fnmatch.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <regex>
#include <set>

#include "battery/json_check.h"
#include "battery/placeholders.h"
#include "smolbox/spec.h"

namespace smolvm_check {
namespace {

using nlohmann::json;

// RunResult status names (smolbox/result.h).
const std::vector<std::string> kStatuses = {"exited",    "signaled",     "timeout",
                                            "cpu_limit", "memory_limit", "output_limit",
                                            "violation", "setup_error",  "internal_error"};
const std::vector<std::string> kOracles = {"canaries", "leftovers", "writes", "sigurg", "tty"};
const std::vector<std::string> kDefaultOracles = {"canaries", "leftovers", "writes"};
// Fifty times today's catalog (145 cases in 73 KB).
constexpr size_t kMaxCatalogBytes = 4 << 20;

bool Contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

std::unexpected<Error> Fail(std::string field, std::string reason) {
  return std::unexpected(Error::Field(std::move(field), std::move(reason)));
}

bool IsIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

bool IsMountNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

bool IsEnvName(const std::string& name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// A path that stays below the directory it is relative to.
bool IsSafeRelative(const std::string& path) {
  if (path.empty() || path.front() == '/') return false;
  for (const auto& part : std::filesystem::path(path)) {
    if (part == "..") return false;
  }
  return true;
}

Expected<void> Require(const json& v, const std::string& path,
                       std::initializer_list<const char*> fields) {
  for (const char* field : fields) {
    if (!v.contains(field)) return Fail(FieldPath(path, field), "is required");
  }
  return {};
}

// std::regex reports a bad pattern by throwing; like JSON, it is parsing user input.
Expected<std::regex> CompileRegex(const std::string& pattern, const std::string& path) {
  try {
    return std::regex(pattern);
  } catch (const std::regex_error& e) {
    return Fail(path, fmt::format("{:?} is not a valid regex ({})", pattern, e.what()));
  }
}

// ---------------------------------------------------------------------------
// Sections of a case

Expected<int64_t> ParseLimitValue(const std::string& name, const json& v, const std::string& path) {
  int64_t value = 0;
  if (name == "cpus") {
    if (!v.is_number()) return Fail(path, "must be a number");
    double cpus = v.get<double>();
    if (!(cpus > 0) || cpus > smolbox::kMaxCpus) {
      return Fail(path, "must be above 0 and at most 1024");
    }
    value = std::llround(cpus * 1000);
  } else {
    SMOLBOX_ASSIGN_OR_RETURN(auto n, GetInteger(v, path));
    value = n;
  }
  if (value <= 0) return Fail(path, "must be positive");
  return value;
}

Expected<void> ParseLimits(const json& v, std::map<std::string, int64_t>& out) {
  if (!v.is_object()) return Fail("limits", "must be an object");
  for (const auto& [name, value] : v.items()) {
    if (!Contains(kLimitNames, name)) {
      return Fail("limits", fmt::format("unknown limit {:?}", name));
    }
    SMOLBOX_ASSIGN_OR_RETURN(auto parsed, ParseLimitValue(name, value, FieldPath("limits", name)));
    out[name] = parsed;
  }
  return {};
}

Expected<void> ParseMountFiles(const json& v, const std::string& path, CaseMount& mount) {
  auto files = GetStringMap(v, path);
  SMOLBOX_TRY(files);
  for (const auto& [name, unused] : *files) {
    if (!IsSafeRelative(name)) {
      return Fail(FieldPath(path, name), "must be a relative path without ..");
    }
  }
  mount.files = std::move(*files);
  return {};
}

Expected<void> ParseMountTarget(const json& v, const std::string& path, CaseMount& mount) {
  auto target = GetString(v, path);
  SMOLBOX_TRY(target);
  std::string normal = std::filesystem::path(*target).lexically_normal().string();
  if (!target->starts_with('/') || normal == "/" || normal != *target) {
    return Fail(path, fmt::format("{:?} must be a normalized absolute path other than /", *target));
  }
  std::string payload = kPayloadTarget;
  if (normal == payload || normal.starts_with(payload + "/")) {
    return Fail(path, fmt::format("{:?} is where the payloads are mounted", *target));
  }
  mount.target = normal;
  return {};
}

Expected<CaseMount> ParseMount(const json& v, const std::string& path) {
  if (auto ok = CheckKeys(v, path, {"name", "mode", "target", "files", "path_canary", "world_writable"}); !ok) {
    return std::unexpected(ok.error());
  }
  SMOLBOX_TRY(Require(v, path, {"name", "target"}));
  CaseMount mount;
  auto name = GetString(v["name"], FieldPath(path, "name"));
  SMOLBOX_TRY(name);
  if (name->empty() || !std::all_of(name->begin(), name->end(), IsMountNameChar)) {
    return Fail(FieldPath(path, "name"), fmt::format("{:?} must match [a-z0-9_]+", *name));
  }
  mount.name = *name;
  if (auto ok = ParseMountTarget(v["target"], FieldPath(path, "target"), mount); !ok) {
    return std::unexpected(ok.error());
  }
  if (v.contains("mode")) {
    auto mode = GetString(v["mode"], FieldPath(path, "mode"));
    SMOLBOX_TRY(mode);
    if (*mode != "ro" && *mode != "rw") {
      return Fail(FieldPath(path, "mode"), fmt::format("must be ro or rw (got {:?})", *mode));
    }
    mount.read_only = *mode == "ro";
  }
  if (v.contains("files")) {
    if (auto ok = ParseMountFiles(v["files"], FieldPath(path, "files"), mount); !ok) {
      return std::unexpected(ok.error());
    }
  }
  if (v.contains("path_canary")) {
    SMOLBOX_ASSIGN_OR_RETURN(auto flag, GetBool(v["path_canary"], FieldPath(path, "path_canary")));
    mount.path_canary = flag;
  }
  if (v.contains("world_writable")) {
    SMOLBOX_ASSIGN_OR_RETURN(auto flag, GetBool(v["world_writable"], FieldPath(path, "world_writable")));
    mount.world_writable = flag;
  }
  return mount;
}

Expected<void> ParseMounts(const json& v, std::vector<CaseMount>& out) {
  if (!v.is_array()) return Fail("mounts", "must be an array of mounts");
  std::set<std::string> names, targets;
  for (size_t i = 0; i < v.size(); ++i) {
    std::string path = IndexPath("mounts", i);
    auto mount = ParseMount(v[i], path);
    SMOLBOX_TRY(mount);
    if (!names.insert(mount->name).second) {
      return Fail(FieldPath(path, "name"), fmt::format("duplicate mount name {:?}", mount->name));
    }
    if (!targets.insert(mount->target).second) {
      return Fail(FieldPath(path, "target"), fmt::format("{:?} is mounted twice", mount->target));
    }
    out.push_back(std::move(*mount));
  }
  return {};
}

Expected<void> ParseStatuses(const json& v, std::vector<std::string>& out) {
  SMOLBOX_ASSIGN_OR_RETURN(auto statuses, GetStringArray(v, "expect.status"));
  for (size_t i = 0; i < statuses.size(); ++i) {
    if (!Contains(kStatuses, (statuses)[i])) {
      return Fail(IndexPath("expect.status", i),
                  fmt::format("unknown status {:?}", (statuses)[i]));
    }
  }
  out = std::move(statuses);
  return {};
}

Expected<void> ParseForbid(const json& v, std::vector<std::string>& out) {
  SMOLBOX_ASSIGN_OR_RETURN(auto patterns, GetStringArray(v, "expect.forbid"));
  for (size_t i = 0; i < patterns.size(); ++i) {
    SMOLBOX_TRY(CompileRegex((patterns)[i], IndexPath("expect.forbid", i)));
  }
  out = std::move(patterns);
  return {};
}

Expected<MaxCount> ParseMaxCount(const json& v) {
  const std::string path = "expect.max_count";
  SMOLBOX_TRY(CheckKeys(v, path, {"pattern", "max"}));
  SMOLBOX_TRY(Require(v, path, {"pattern", "max"}));
  MaxCount out;
  auto pattern = GetString(v["pattern"], path + ".pattern");
  SMOLBOX_TRY(pattern);
  SMOLBOX_ASSIGN_OR_RETURN(auto regex, CompileRegex(*pattern, path + ".pattern"));
  if (regex.mark_count() != 1) {
    return Fail(path + ".pattern", fmt::format("{:?} must have exactly one capture group (has {})",
                                               *pattern, regex.mark_count()));
  }
  auto max = GetInteger(v["max"], path + ".max");
  SMOLBOX_TRY(max);
  if (*max < 0) return Fail(path + ".max", "must not be negative");
  return MaxCount{*pattern, *max};
}

Expected<void> ParseExpect(const json& v, Expect& out) {
  if (auto ok =
          CheckKeys(v, "expect",
                    {"status", "max_wall_ms", "stdout_contains", "forbid", "max_count", "outputs"});
      !ok) {
    return ok;
  }
  if (v.contains("status")) {
    SMOLBOX_TRY(ParseStatuses(v["status"], out.status));
  }
  if (v.contains("max_wall_ms")) {
    SMOLBOX_ASSIGN_OR_RETURN(auto ms, GetInteger(v["max_wall_ms"], "expect.max_wall_ms"));
    if (ms <= 0) return Fail("expect.max_wall_ms", "must be positive");
    out.max_wall_ms = ms;
  }
  if (v.contains("stdout_contains")) {
    SMOLBOX_ASSIGN_OR_RETURN(auto texts, GetStringArray(v["stdout_contains"], "expect.stdout_contains"));
    out.stdout_contains = std::move(texts);
  }
  if (v.contains("forbid")) {
    SMOLBOX_TRY(ParseForbid(v["forbid"], out.forbid));
  }
  if (v.contains("max_count")) {
    auto max_count = ParseMaxCount(v["max_count"]);
    SMOLBOX_TRY(max_count);
    out.max_count = std::move(*max_count);
  }
  if (v.contains("outputs")) {
    auto outputs = GetStringMap(v["outputs"], "expect.outputs");
    SMOLBOX_TRY(outputs);
    out.outputs = std::move(*outputs);
  }
  return {};
}

Expected<void> ParseOracles(const json& v, std::vector<std::string>& out) {
  SMOLBOX_ASSIGN_OR_RETURN(auto names, GetStringArray(v, "oracles"));
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& name = (names)[i];
    if (!Contains(kOracles, name)) {
      return Fail(IndexPath("oracles", i), fmt::format("unknown oracle {:?}", name));
    }
    if (std::count(names.begin(), names.end(), name) > 1) {
      return Fail(IndexPath("oracles", i), fmt::format("oracle {:?} is listed twice", name));
    }
  }
  out = std::move(names);
  return {};
}

Expected<void> ParseEnv(const json& v, std::map<std::string, std::string>& out) {
  auto env = GetStringMap(v, "env");
  SMOLBOX_TRY(env);
  for (const auto& [key, unused] : *env) {
    if (!IsEnvName(key)) return Fail("env", fmt::format("{:?} is not a variable name", key));
  }
  out = std::move(*env);
  return {};
}

// ---------------------------------------------------------------------------
// Checks across sections

Expected<void> CheckOutputs(const Case& c) {
  for (const auto& [key, unused] : c.expect.outputs) {
    std::string path = FieldPath("expect.outputs", key);
    size_t slash = key.find('/');
    std::string name = key.substr(0, slash);
    auto mount = std::find_if(c.mounts.begin(), c.mounts.end(),
                              [&](const CaseMount& m) { return m.name == name; });
    if (slash == std::string::npos || mount == c.mounts.end() || mount->read_only) {
      return Fail(path, "must start with the name of a rw mount and /");
    }
    if (!IsSafeRelative(key.substr(slash + 1))) {
      return Fail(path, "must name a file below the mount, without ..");
    }
  }
  return {};
}

Expected<void> CheckArgs(const Case& c) {
  for (size_t i = 0; i < c.args.size(); ++i) {
    for (const PlaceholderRef& ref : FindPlaceholders(c.args[i])) {
      if (!ref.name.starts_with("mount:")) continue;
      std::string name = ref.name.substr(6);
      bool known = std::any_of(c.mounts.begin(), c.mounts.end(),
                               [&](const CaseMount& m) { return m.name == name; });
      if (!known) return Fail(IndexPath("args", i), fmt::format("no mount named {:?}", name));
    }
  }
  return {};
}

Expected<void> CheckFunctional(const Case& c) {
  const Expect& e = c.expect;
  if (c.adversarial || !e.stdout_contains.empty() || !e.outputs.empty() || !e.status.empty()) {
    return {};
  }
  return Fail("expect", "a functional case needs stdout_contains, outputs or status");
}

Expected<void> ResolvePayload(const std::string& directory, Case& c) {
  if (!IsSafeRelative(c.payload)) {
    return Fail("payload",
                fmt::format("{:?} must be relative to the catalog, without ..", c.payload));
  }
  std::string full = (std::filesystem::path(directory) / c.payload).lexically_normal().string();
  struct stat st {};
  if (stat(full.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return std::unexpected(Error{"", fmt::format("payload {} does not exist", c.payload), 0});
  }
  c.payload = full;
  return {};
}

// ---------------------------------------------------------------------------
// One case

Expected<std::string> ParseEnum(const json& v, const std::string& field,
                                const std::vector<std::string>& allowed) {
  SMOLBOX_ASSIGN_OR_RETURN(auto value, GetString(v[field], field));
  if (!Contains(allowed, value)) {
    return Fail(field, fmt::format("unknown {} {:?} (expected one of {})", field, value,
                                   fmt::join(allowed, ", ")));
  }
  return value;
}

Expected<void> ParseHeader(const json& v, Case& c) {
  auto category = ParseEnum(v, "category", kCategories);
  SMOLBOX_TRY(category);
  SMOLBOX_ASSIGN_OR_RETURN(auto kind, ParseEnum(v, "kind", {"adversarial", "functional"}));
  auto lang = ParseEnum(v, "lang", {"python", "js", "sh"});
  SMOLBOX_TRY(lang);
  auto payload = GetString(v["payload"], "payload");
  SMOLBOX_TRY(payload);
  c.category = *category;
  c.adversarial = kind == "adversarial";
  c.lang = *lang;
  c.payload = *payload;
  if (v.contains("user")) {
    auto user = ParseEnum(v, "user", kCaseUsers);
    SMOLBOX_TRY(user);
    c.user = *user;
  }
  if (v.contains("description")) {
    SMOLBOX_ASSIGN_OR_RETURN(auto text, GetString(v["description"], "description"));
    c.description = text;
  }
  return {};
}

Expected<void> ParseInputs(const json& v, Case& c) {
  if (v.contains("args")) {
    auto args = GetStringArray(v["args"], "args");
    SMOLBOX_TRY(args);
    c.args = std::move(*args);
  }
  if (v.contains("stdin")) {
    SMOLBOX_ASSIGN_OR_RETURN(auto text, GetString(v["stdin"], "stdin"));
    c.stdin_data = std::move(text);
  }
  if (v.contains("env")) {
    SMOLBOX_TRY(ParseEnv(v["env"], c.env));
  }
  if (v.contains("limits")) {
    SMOLBOX_TRY(ParseLimits(v["limits"], c.limits));
  }
  if (v.contains("mounts")) {
    SMOLBOX_TRY(ParseMounts(v["mounts"], c.mounts));
  }
  return {};
}

// A policy word goes into the sandbox's argv as one word: it may not be empty or hold a space.
Expected<std::vector<std::string>> GetPolicyWords(const json& v, const std::string& path) {
  SMOLBOX_ASSIGN_OR_RETURN(auto words, GetStringArray(v, path));
  for (size_t i = 0; i < words.size(); ++i) {
    bool plain = !words[i].empty() && std::none_of(words[i].begin(), words[i].end(), [](char ch) {
      return std::isspace(static_cast<unsigned char>(ch)) || std::iscntrl(static_cast<unsigned char>(ch));
    });
    if (!plain) return Fail(IndexPath(path, i), "must be a name or range without spaces");
  }
  return words;
}

Expected<void> ParseEgress(const json& v, Case& c) {
  SMOLBOX_TRY(CheckKeys(v, "egress", {"net", "allow_host", "allow_cidr", "deny_cidr", "net_limit", "trust_test_ca"}));
  CaseEgress egress;
  for (auto [key, out] : {std::pair{"net", &egress.net}, std::pair{"trust_test_ca", &egress.trust_test_ca}}) {
    if (!v.contains(key)) continue;
    SMOLBOX_ASSIGN_OR_RETURN(bool value, GetBool(v[key], FieldPath("egress", key)));
    *out = value;
  }
  for (auto [key, out] : {std::pair{"allow_host", &egress.allow_host},
                          std::pair{"allow_cidr", &egress.allow_cidr},
                          std::pair{"deny_cidr", &egress.deny_cidr}}) {
    if (!v.contains(key)) continue;
    SMOLBOX_ASSIGN_OR_RETURN(auto words, GetPolicyWords(v[key], FieldPath("egress", key)));
    *out = std::move(words);
  }
  if (v.contains("net_limit")) {
    SMOLBOX_ASSIGN_OR_RETURN(int64_t bytes, GetInteger(v["net_limit"], "egress.net_limit"));
    if (bytes < 1) return Fail("egress.net_limit", "must be at least 1 byte");
    egress.net_limit = bytes;
  }
  if (!egress.net && egress.allow_host.empty() && egress.allow_cidr.empty()) {
    return Fail("egress", "needs net, allow_host or allow_cidr: a case without a policy has no network");
  }
  c.egress = std::move(egress);
  return {};
}

// An egress case, and only one, says what policy it runs under.
Expected<void> CheckEgress(const Case& c) {
  if (c.category == "egress" && !c.egress) return Fail("egress", "is required in category egress");
  if (c.category != "egress" && c.egress) return Fail("egress", "belongs to category egress only");
  return {};
}

// Everything but the id, which the caller needs first to name the case in errors.
Expected<void> ParseCaseBody(const json& v, const std::string& directory, Case& c) {
  SMOLBOX_TRY(Require(v, "", {"category", "kind", "lang", "payload"}));
  SMOLBOX_TRY(ParseHeader(v, c));
  SMOLBOX_TRY(ParseInputs(v, c));
  if (v.contains("expect")) {
    SMOLBOX_TRY(ParseExpect(v["expect"], c.expect));
  }
  c.oracles = kDefaultOracles;
  if (v.contains("oracles")) {
    SMOLBOX_TRY(ParseOracles(v["oracles"], c.oracles));
  }
  if (v.contains("egress")) {
    SMOLBOX_TRY(ParseEgress(v["egress"], c));
  }
  for (auto check : {CheckOutputs, CheckArgs, CheckFunctional, CheckEgress}) {
    SMOLBOX_TRY(check(c));
  }
  return ResolvePayload(directory, c);
}

Expected<std::string> ParseId(const json& v) {
  if (!v.is_object()) return Fail("", "must be an object");
  if (!v.contains("id")) return Fail("id", "is required");
  auto id = GetString(v["id"], "id");
  SMOLBOX_TRY(id);
  if (id->empty() || !std::all_of(id->begin(), id->end(), IsIdChar)) {
    return Fail("id", fmt::format("{:?} must match [a-z0-9_.]+", *id));
  }
  return *id;
}

Expected<Case> ParseCase(const json& v, size_t index, const std::string& directory) {
  auto id = ParseId(v);
  if (!id) return std::unexpected(Within(fmt::format("catalog: cases[{}]", index), id.error()));
  std::string prefix = fmt::format("catalog: case {:?}", *id);
  if (auto ok = CheckKeys(v, "",
                          {"id", "category", "kind", "lang", "payload", "user", "args", "stdin",
                           "env", "limits", "mounts", "expect", "oracles", "description",
                           "egress"});
      !ok) {
    return std::unexpected(Within(prefix, ok.error()));
  }
  Case c;
  c.id = *id;
  if (auto ok = ParseCaseBody(v, directory, c); !ok) {
    return std::unexpected(Within(prefix, ok.error()));
  }
  return c;
}

// Errors come out naming the case: "catalog: case \"x\": field: reason".
Expected<std::vector<Case>> ParseCases(const json& v, const std::string& directory) {
  std::vector<Case> cases;
  std::set<std::string> ids;
  for (size_t i = 0; i < v.size(); ++i) {
    SMOLBOX_ASSIGN_OR_RETURN(auto c, ParseCase(v[i], i, directory));
    if (!ids.insert(c.id).second) {
      return std::unexpected(Error::Field(fmt::format("catalog: case {:?}: id", c.id),
                                          fmt::format("duplicate id (cases[{}] repeats it)", i)));
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

int64_t DefaultLimit(const std::string& name) {
  const smolbox::Limits defaults;
  if (name == "timeout_ms") return defaults.timeout_ms;
  if (name == "cpu_ms") return defaults.cpu_ms.value_or(0);
  if (name == "memory_mib") return defaults.memory_mib;
  if (name == "cpus") return std::llround(defaults.cpus * 1000);
  if (name == "pids") return defaults.pids;
  if (name == "storage_mib") return defaults.storage_mib;
  if (name == "output_bytes") return defaults.output_bytes;
  if (name == "files") return defaults.files;
  return 0;
}

}  // namespace

bool Case::HasOracle(const std::string& name) const { return Contains(oracles, name); }

int64_t Case::Limit(const std::string& name) const {
  auto it = limits.find(name);
  return it != limits.end() ? it->second : DefaultLimit(name);
}

Expected<Catalog> LoadCatalog(const std::string& path) {
  auto text = ReadTextFile(path, kMaxCatalogBytes);
  if (!text) return std::unexpected(Within("catalog " + path, text.error()));
  return ParseCatalog(*text, path);
}

Expected<Catalog> ParseCatalog(const std::string& text, const std::string& path) {
  const std::string origin = "catalog " + path;
  auto doc = ParseJsonText(text, {.max_bytes = kMaxCatalogBytes});
  if (!doc) return std::unexpected(Within(origin, doc.error()));
  if (auto ok = CheckKeys(*doc, "", {"version", "cases"}); !ok) {
    return std::unexpected(Within(origin, ok.error()));
  }
  if (!doc->contains("version") || (*doc)["version"] != 1) {
    return std::unexpected(Error::Field(origin + ": version", "must be 1"));
  }
  if (!doc->contains("cases") || !(*doc)["cases"].is_array()) {
    return std::unexpected(Error::Field(origin + ": cases", "must be an array of cases"));
  }
  Catalog catalog;
  std::error_code ec;
  auto absolute = std::filesystem::absolute(path, ec);
  if (ec) return std::unexpected(Error{origin, "cannot resolve its directory", ec.value()});
  catalog.directory = absolute.lexically_normal().parent_path().string();
  auto cases = ParseCases((*doc)["cases"], catalog.directory);
  SMOLBOX_TRY(cases);
  catalog.cases = std::move(*cases);
  return catalog;
}

std::vector<Case> SelectCases(const Catalog& catalog, const std::vector<std::string>& globs,
                              const std::string& category) {
  auto matches = [&globs](const std::string& id) {
    if (globs.empty()) return true;
    return std::any_of(globs.begin(), globs.end(), [&id](const std::string& glob) {
      return glob.empty() || fnmatch(glob.c_str(), id.c_str(), 0) == 0;
    });
  };
  std::vector<Case> out;
  for (const Case& c : catalog.cases) {
    if (!matches(c.id)) continue;
    if (!category.empty() && c.category != category) continue;
    out.push_back(c);
  }
  return out;
}

}  // namespace smolvm_check
