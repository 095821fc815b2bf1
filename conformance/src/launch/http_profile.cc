#include "launch/http_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <set>

#include "battery/json_check.h"
#include "battery/placeholders.h"

namespace smolvm_check {
namespace {

using nlohmann::json;

std::unexpected<Error> Fail(std::string field, std::string reason) {
  return std::unexpected(Error::Field(std::move(field), std::move(reason)));
}

bool Contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// Placeholders that stand for a JSON value, each only as a whole string.
const std::vector<std::string>& ValueNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all = {"argv",        "env",         "stdin",      "mounts",   "user",
                                    "net",         "allow_hosts", "allow_cidrs", "deny_cidrs", "net_limit",
                                    "ca_bundle",   "timeout_s",   "vcpus"};
    all.insert(all.end(), kLimitNames.begin(), kLimitNames.end());
    return all;
  }();
  return names;
}

// Placeholders replaced in place, in any string of the calls.
const std::vector<std::string> kRunNames = {"workdir", "sandbox_name", "api_socket", "volume_root"};
// And in a "mount" element.
const std::vector<std::string> kMountNames = {"source", "target"};

// The placeholder that a whole string is, if it is one.
std::optional<std::string> WholePlaceholder(const std::string& text) {
  auto refs = FindPlaceholders(text);
  if (refs.size() == 1 && refs[0].size == text.size()) return refs[0].name;
  return std::nullopt;
}

// Every string of a JSON template, with the path of the value it is.
void ForEachString(const json& t, const std::string& path, const std::function<void(const std::string&, const std::string&)>& visit) {
  if (t.is_string()) return visit(t.get<std::string>(), path);
  if (t.is_array()) {
    for (size_t i = 0; i < t.size(); ++i) ForEachString(t[i], IndexPath(path, i), visit);
  } else if (t.is_object()) {
    for (const auto& [key, value] : t.items()) ForEachString(value, FieldPath(path, key), visit);
  }
}

// The placeholders a template uses, checked: value placeholders only as whole strings (and only
// where values_allowed), scalars from `scalars`.
Expected<std::set<std::string>> CheckJsonTemplate(const json& t, const std::string& path, const std::vector<std::string>& scalars,
                                                  bool values_allowed) {
  std::set<std::string> used;
  std::optional<Error> failure;
  ForEachString(t, path, [&](const std::string& text, const std::string& at) {
    if (failure) return;
    auto whole = WholePlaceholder(text);
    for (const PlaceholderRef& ref : FindPlaceholders(text)) {
      bool value = Contains(ValueNames(), ref.name);
      if (value && (!values_allowed || whole != ref.name)) {
        failure = Error::Field(at, fmt::format("{{{}}} stands for a JSON value: it must be the whole string, in a body", ref.name));
        return;
      }
      if (!value && !Contains(scalars, ref.name)) {
        failure = Error::Field(at, fmt::format("unknown placeholder {{{}}}", ref.name));
        return;
      }
      used.insert(ref.name);
    }
  });
  if (failure) return std::unexpected(*failure);
  return used;
}

Expected<HttpCall> ParseCall(const json& v, const std::string& path) {
  SMOLBOX_TRY(CheckKeys(v, path, {"method", "path", "body", "result", "always"}));
  HttpCall call;
  for (const char* key : {"method", "path"}) {
    if (!v.contains(key)) return Fail(FieldPath(path, key), "is required");
  }
  SMOLBOX_ASSIGN_OR_RETURN(call.method, GetString(v["method"], FieldPath(path, "method")));
  if (!Contains({"GET", "POST", "PUT", "DELETE"}, call.method)) {
    return Fail(FieldPath(path, "method"), fmt::format("must be GET, POST, PUT or DELETE (got {:?})", call.method));
  }
  SMOLBOX_ASSIGN_OR_RETURN(call.path, GetString(v["path"], FieldPath(path, "path")));
  if (!call.path.starts_with('/')) return Fail(FieldPath(path, "path"), "must start with /");
  if (v.contains("body")) call.body = v["body"];
  if (v.contains("result")) {
    SMOLBOX_ASSIGN_OR_RETURN(call.result, GetBool(v["result"], FieldPath(path, "result")));
  }
  if (v.contains("always")) {
    SMOLBOX_ASSIGN_OR_RETURN(call.always, GetBool(v["always"], FieldPath(path, "always")));
  }
  return call;
}

Expected<void> ParseUsers(const json& v, Profile& p) {
  if (!v.is_object()) return Fail("user", "must be an object of case user -> the value of {user}");
  for (const auto& [user, value] : v.items()) {
    if (!Contains(kCaseUsers, user)) return Fail("user", fmt::format("unknown user {:?}", user));
    SMOLBOX_ASSIGN_OR_RETURN(auto text, GetString(value, FieldPath("user", user)));
    p.user_args[user] = {text};
  }
  return {};
}

Expected<void> ParseResultFields(const json& v, HttpTemplates& http) {
  SMOLBOX_ASSIGN_OR_RETURN(auto fields, GetStringMap(v, "result_fields"));
  for (const auto& [name, pointer] : fields) {
    if (!Contains({"exit_code", "stdout", "stderr"}, name)) {
      return Fail("result_fields", fmt::format("unknown field {:?} (exit_code, stdout or stderr)", name));
    }
    try {
      (void)json::json_pointer(pointer);
    } catch (const json::exception&) {
      return Fail(FieldPath("result_fields", name), fmt::format("{:?} is no JSON pointer", pointer));
    }
    http.result_fields[name] = pointer;
  }
  return {};
}

// What the calls use, in one set.
Expected<std::set<std::string>> UsedByCalls(const Profile& p, const std::vector<std::string>& scalars) {
  std::set<std::string> used;
  for (size_t i = 0; i < p.http->calls.size(); ++i) {
    const HttpCall& call = p.http->calls[i];
    std::string path = IndexPath("calls", i);
    SMOLBOX_ASSIGN_OR_RETURN(auto in_path, CheckJsonTemplate(json(call.path), FieldPath(path, "path"), scalars, false));
    used.insert(in_path.begin(), in_path.end());
    if (call.body) {
      SMOLBOX_ASSIGN_OR_RETURN(auto in_body, CheckJsonTemplate(*call.body, FieldPath(path, "body"), scalars, true));
      used.insert(in_body.begin(), in_body.end());
    }
  }
  return used;
}

std::vector<std::string> ScalarNames(const Profile& p) {
  std::vector<std::string> names = kRunNames;
  for (const auto& [name, unused] : p.variables) names.push_back(name);
  return names;
}

// How many times {name} is a whole string in the calls' bodies.
size_t CountValue(const Profile& p, const std::string& name) {
  size_t count = 0;
  for (const HttpCall& call : p.http->calls) {
    if (!call.body) continue;
    ForEachString(*call.body, "", [&](const std::string& text, const std::string&) {
      count += WholePlaceholder(text) == name ? 1 : 0;
    });
  }
  return count;
}

// ---------------------------------------------------------------------------------------------
// Rendering

struct RenderContext {
  const Profile& profile;
  const Case& c;
  const Placement& placement;
  const HttpRunValues& values;
};

using Rendered = std::optional<json>;  // nullopt: left out

Expected<std::string> Scalars(const std::string& text, const RenderContext& ctx,
                              const std::map<std::string, std::string>& extra = {}) {
  return Substitute(text, [&](const std::string& name) -> std::optional<std::string> {
    if (auto it = extra.find(name); it != extra.end()) return it->second;
    if (name == "workdir") return std::string(kSandboxWorkdir);
    if (name == "sandbox_name") return ctx.values.sandbox_name;
    if (name == "api_socket") return ctx.values.api_socket;
    if (name == "volume_root") return ctx.values.volume_root;
    if (auto it = ctx.profile.variables.find(name); it != ctx.profile.variables.end()) return it->second;
    return std::nullopt;
  });
}

// A host path as the server sees it: relative to the volume root, which holds it.
Expected<std::string> BeneathRoot(const std::string& host, const RenderContext& ctx) {
  auto relative = std::filesystem::path(host).lexically_relative(ctx.values.volume_root);
  if (relative.empty() || *relative.begin() == "..") {
    return Fail("mounts", fmt::format("{} is not beneath the volume root {}", host, ctx.values.volume_root));
  }
  return relative.string();
}

Expected<json> RenderTemplate(const json& t, const RenderContext& ctx, const std::map<std::string, std::string>& extra);

Expected<json> MountElement(const json& t, const std::string& host, const std::string& target, const RenderContext& ctx) {
  SMOLBOX_ASSIGN_OR_RETURN(auto source, BeneathRoot(host, ctx));
  return RenderTemplate(t, ctx, {{"source", source}, {"target", target}});
}

Expected<Rendered> Mounts(const RenderContext& ctx) {
  const HttpTemplates& http = *ctx.profile.http;
  json out = json::array();
  const std::string& payloads = ctx.placement.payload_source.empty() ? ctx.placement.payload_dir : ctx.placement.payload_source;
  SMOLBOX_ASSIGN_OR_RETURN(auto payload, MountElement(http.mount_ro, payloads, kPayloadTarget, ctx));
  out.push_back(std::move(payload));
  for (const CaseMount& m : ctx.c.mounts) {
    auto source = ctx.placement.mount_sources.find(m.name);
    if (source == ctx.placement.mount_sources.end()) return Fail("mounts", fmt::format("mount {:?} has no host directory", m.name));
    SMOLBOX_ASSIGN_OR_RETURN(auto element, MountElement(m.read_only ? http.mount_ro : http.mount_rw, source->second, m.target, ctx));
    out.push_back(std::move(element));
  }
  return out;
}

json LimitValue(const std::string& name, int64_t value) {
  if (name == "cpus") return static_cast<double>(value) / 1000.0;
  return value;
}

// The test CA's PEM, which the API takes as text where the CLI takes a file.
Expected<std::string> ReadCaBundle(const std::string& path) {
  if (path.empty()) return Fail("ca_bundle", "the case trusts the test CA, but there is no test internet");
  return ReadTextFile(path, 1 << 20);
}

// The value {name} stands for in this case, or nullopt when the case has none.
Expected<Rendered> Value(const std::string& name, const RenderContext& ctx) {
  const Case& c = ctx.c;
  if (name == "argv") {
    SMOLBOX_ASSIGN_OR_RETURN(auto argv, CaseArgv(ctx.profile, c, ctx.placement));
    return json(argv);
  }
  if (name == "env") return c.env.empty() ? Rendered{} : Rendered{json(c.env)};
  if (name == "stdin") return c.stdin_data ? Rendered{json(*c.stdin_data)} : Rendered{};
  if (name == "mounts") return Mounts(ctx);
  if (name == "user") {
    auto entry = ctx.profile.user_args.find(c.user);
    return entry == ctx.profile.user_args.end() ? Rendered{} : Rendered{json(entry->second.front())};
  }
  if (name == "timeout_s") {
    if (!c.limits.contains("timeout_ms")) return Rendered{};
    return json((c.Limit("timeout_ms") + 999) / 1000);
  }
  if (name == "vcpus") {
    if (!c.limits.contains("cpus")) return Rendered{};
    return json(std::max<int64_t>(1, (c.Limit("cpus") + 999) / 1000));
  }
  if (Contains(kLimitNames, name)) return c.limits.contains(name) ? Rendered{LimitValue(name, c.Limit(name))} : Rendered{};
  if (!c.egress) return Rendered{};
  const CaseEgress& egress = *c.egress;
  auto list = [](const std::vector<std::string>& items) { return items.empty() ? Rendered{} : Rendered{json(items)}; };
  if (name == "net") return egress.net ? Rendered{json(true)} : Rendered{};
  if (name == "allow_hosts") return list(egress.allow_host);
  if (name == "allow_cidrs") return list(egress.allow_cidr);
  if (name == "deny_cidrs") return list(egress.deny_cidr);
  if (name == "net_limit") return egress.net_limit ? Rendered{json(*egress.net_limit)} : Rendered{};
  if (name == "ca_bundle") {
    if (!egress.trust_test_ca) return Rendered{};
    SMOLBOX_ASSIGN_OR_RETURN(auto pem, ReadCaBundle(ctx.placement.test_ca_path));
    return json(std::move(pem));
  }
  return Fail("", fmt::format("unknown placeholder {{{}}}", name));
}

Expected<Rendered> Render(const json& t, const RenderContext& ctx, const std::map<std::string, std::string>& extra) {
  if (t.is_string()) {
    const std::string text = t.get<std::string>();
    auto whole = WholePlaceholder(text);
    if (whole && Contains(ValueNames(), *whole)) return Value(*whole, ctx);
    SMOLBOX_ASSIGN_OR_RETURN(auto rendered, Scalars(text, ctx, extra));
    return json(rendered);
  }
  if (t.is_array()) {
    json out = json::array();
    for (const json& element : t) {
      SMOLBOX_ASSIGN_OR_RETURN(auto rendered, Render(element, ctx, extra));
      if (rendered) out.push_back(std::move(*rendered));
    }
    return out;
  }
  if (t.is_object()) {
    json out = json::object();
    for (const auto& [key, value] : t.items()) {
      SMOLBOX_ASSIGN_OR_RETURN(auto rendered, Render(value, ctx, extra));
      if (rendered) out[key] = std::move(*rendered);
    }
    // Emptied by the case, not written empty: left out, as its members were.
    if (out.empty() && !t.empty()) return Rendered{};
    return out;
  }
  return t;
}

Expected<json> RenderTemplate(const json& t, const RenderContext& ctx, const std::map<std::string, std::string>& extra) {
  SMOLBOX_ASSIGN_OR_RETURN(auto rendered, Render(t, ctx, extra));
  return rendered ? *rendered : json::object();
}

Expected<std::string> RunScalars(const Profile& p, const std::string& text, const HttpRunValues& values) {
  static const Case kNoCase;
  static const Placement kNoPlacement;
  return Scalars(text, RenderContext{p, kNoCase, kNoPlacement, values});
}

}  // namespace

bool IsHttpPlaceholder(const std::string& name) {
  return Contains(ValueNames(), name) || Contains(kRunNames, name) || Contains(kMountNames, name);
}

Expected<void> ParseHttpFields(const json& doc, Profile& p) {
  for (const char* field : {"command", "env", "stdin", "limits", "limit_args", "egress"}) {
    if (doc.contains(field)) return Fail(field, "has no place in an http profile: its calls say it");
  }
  for (const char* field : {"endpoint", "calls", "mount"}) {
    if (!doc.contains(field)) return Fail(field, "is required in an http profile");
  }
  HttpTemplates http;
  SMOLBOX_ASSIGN_OR_RETURN(http.endpoint, GetString(doc["endpoint"], "endpoint"));
  if (!http.endpoint.starts_with("unix:") && !http.endpoint.starts_with("http://")) {
    return Fail("endpoint", fmt::format("must be unix:PATH or http://HOST:PORT (got {:?})", http.endpoint));
  }
  if (doc.contains("server")) {
    SMOLBOX_ASSIGN_OR_RETURN(http.server, GetStringArray(doc["server"], "server"));
  }
  const json& calls = doc["calls"];
  if (!calls.is_array() || calls.empty()) return Fail("calls", "must be a non-empty array of calls");
  for (size_t i = 0; i < calls.size(); ++i) {
    SMOLBOX_ASSIGN_OR_RETURN(auto call, ParseCall(calls[i], IndexPath("calls", i)));
    http.calls.push_back(std::move(call));
  }
  const json& mount = doc["mount"];
  SMOLBOX_TRY(CheckKeys(mount, "mount", {"ro", "rw"}));
  if (!mount.contains("ro") || !mount.contains("rw")) return Fail("mount", "needs both ro and rw");
  for (const char* mode : {"ro", "rw"}) {
    if (!mount[mode].is_object()) return Fail(FieldPath("mount", mode), "must be an object: the element of {mounts} for one volume");
  }
  http.mount_ro = mount["ro"];
  http.mount_rw = mount["rw"];
  if (doc.contains("user")) {
    SMOLBOX_TRY(ParseUsers(doc["user"], p));
  }
  if (doc.contains("result_fields")) {
    SMOLBOX_TRY(ParseResultFields(doc["result_fields"], http));
  }
  p.http = std::move(http);
  // What it can say of an egress policy is what its calls have placeholders for.
  SMOLBOX_ASSIGN_OR_RETURN(auto used, UsedByCalls(p, ScalarNames(p)));
  if (used.contains("net") || used.contains("allow_hosts") || used.contains("allow_cidrs")) {
    EgressTemplates egress;
    auto says = [&](const char* name) { return used.contains(name) ? std::vector<std::string>{fmt::format("{{{}}}", name)} : std::vector<std::string>{}; };
    egress.net = says("net");
    egress.allow_host = says("allow_hosts");
    egress.allow_cidr = says("allow_cidrs");
    egress.deny_cidr = says("deny_cidrs");
    egress.net_limit = says("net_limit");
    egress.ca_bundle = says("ca_bundle");
    p.egress = std::move(egress);
  }
  return {};
}

Expected<void> ValidateHttpProfile(const Profile& p) {
  const HttpTemplates& http = *p.http;
  std::vector<std::string> scalars = ScalarNames(p);
  SMOLBOX_TRY(CheckJsonTemplate(json(http.endpoint), "endpoint", scalars, false));
  SMOLBOX_TRY(CheckJsonTemplate(json(http.server), "server", scalars, false));
  std::vector<std::string> mount_scalars = scalars;
  mount_scalars.insert(mount_scalars.end(), kMountNames.begin(), kMountNames.end());
  SMOLBOX_TRY(CheckJsonTemplate(http.mount_ro, "mount.ro", mount_scalars, false));
  SMOLBOX_TRY(CheckJsonTemplate(http.mount_rw, "mount.rw", mount_scalars, false));
  SMOLBOX_ASSIGN_OR_RETURN(auto used, UsedByCalls(p, scalars));
  size_t results = static_cast<size_t>(std::count_if(http.calls.begin(), http.calls.end(), [](const HttpCall& c) { return c.result; }));
  if (results != 1) return Fail("calls", fmt::format("need exactly one call with \"result\": true (found {})", results));
  if (CountValue(p, "argv") != 1) return Fail("calls", "need {argv} exactly once, as a whole string of a body");
  for (const char* needed : {"mounts", "env"}) {
    if (!used.contains(needed)) return Fail("calls", fmt::format("need {{{}}}: the cases have {} to pass in", needed, needed));
  }
  bool exit_code = !p.smolbox_json;
  if (exit_code && !http.result_fields.contains("exit_code")) {
    return Fail("result_fields", "needs exit_code, a JSON pointer into the result call's reply, for an exit_code result");
  }
  if (!exit_code && !http.result_fields.empty()) return Fail("result_fields", "is for an exit_code result only");
  for (size_t i = 0; i < p.unsupported.size(); ++i) {
    if (!Contains(kLimitNames, p.unsupported[i])) {
      return Fail(IndexPath("unsupported", i), fmt::format("unknown limit {:?}", p.unsupported[i]));
    }
  }
  for (const std::string& name : kLimitNames) {
    bool mapped = used.contains(name) || (name == "timeout_ms" && used.contains("timeout_s")) ||
                  (name == "cpus" && used.contains("vcpus"));
    bool unsupported = Contains(p.unsupported, name);
    if (!mapped && !unsupported) return Fail("unsupported", fmt::format("limit {:?} is neither mapped nor declared unsupported", name));
    if (mapped && unsupported) return Fail("unsupported", fmt::format("limit {:?} is both mapped and declared unsupported", name));
  }
  return {};
}

Expected<json> RenderHttpPlan(const Profile& p, const Case& c, const Placement& placement, const HttpRunValues& values) {
  const std::string where = fmt::format("case {:?} under profile {}", c.id, p.name);
  RenderContext ctx{p, c, placement, values};
  json calls = json::array();
  for (size_t i = 0; i < p.http->calls.size(); ++i) {
    const HttpCall& call = p.http->calls[i];
    json out = {{"method", call.method}, {"result", call.result}, {"always", call.always}};
    auto path = Scalars(call.path, ctx);
    if (!path) return std::unexpected(Within(where, Within(FieldPath(IndexPath("calls", i), "path"), path.error())));
    out["path"] = *path;
    if (call.body) {
      auto body = RenderTemplate(*call.body, ctx, {});
      if (!body) return std::unexpected(Within(where, Within(FieldPath(IndexPath("calls", i), "body"), body.error())));
      out["body"] = std::move(*body);
    }
    calls.push_back(std::move(out));
  }
  SMOLBOX_ASSIGN_OR_RETURN(auto endpoint, RenderHttpEndpoint(p, values));
  json plan = {{"endpoint", endpoint}, {"calls", std::move(calls)}, {"result", p.smolbox_json ? "smolbox_json" : "exit_code"}};
  if (!p.http->result_fields.empty()) plan["result_fields"] = p.http->result_fields;
  return plan;
}

Expected<std::vector<std::string>> RenderHttpServer(const Profile& p, const HttpRunValues& values) {
  std::vector<std::string> words;
  for (size_t i = 0; i < p.http->server.size(); ++i) {
    auto word = RunScalars(p, p.http->server[i], values);
    if (!word) return std::unexpected(Within(IndexPath("server", i), word.error()));
    words.push_back(std::move(*word));
  }
  return words;
}

Expected<std::string> RenderHttpEndpoint(const Profile& p, const HttpRunValues& values) {
  auto endpoint = RunScalars(p, p.http->endpoint, values);
  if (!endpoint) return std::unexpected(Within("endpoint", endpoint.error()));
  return endpoint;
}

}  // namespace smolvm_check
