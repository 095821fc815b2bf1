#include "smolbox/spec.h"

#include <charconv>
#include <optional>
#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "json_bounds.h"
#include "trust_store.h"

namespace smolbox {
namespace {

using nlohmann::json;

// More than any command the kernel would start: execve takes at most a quarter of the stack
// rlimit for argv and env (2 MiB under the default 8 MiB), and each string costs its pointer
// and NUL there, so 233,000 of them at most.
constexpr size_t kMaxSpecValues = 1 << 18;

std::unexpected<Error> Fail(std::string field, std::string reason) {
  return std::unexpected(Error::Field(std::move(field), std::move(reason)));
}

std::string Join(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

// Error messages are one line: anything unprintable in user input is escaped.
std::string Printable(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return fmt::format("{:?}", text);
  }
  return std::string(text);
}

bool HasNul(std::string_view text) { return text.find('\0') != std::string_view::npos; }

// ---------------------------------------------------------------------------
// JSON parsing: every value is checked for its type, every key against a table.

Expected<std::string> GetString(const json& v, const std::string& path) {
  if (!v.is_string()) return Fail(path, "must be a string");
  return v.get<std::string>();
}

Expected<int64_t> GetInteger(const json& v, const std::string& path) {
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Fail(path, "is out of range");
  }
  if (!v.is_number_integer()) return Fail(path, "must be an integer");
  return v.get<int64_t>();
}

Expected<std::vector<std::string>> GetStringArray(const json& v, const std::string& path) {
  if (!v.is_array()) return Fail(path, "must be an array of strings");
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    SMOLBOX_ASSIGN_OR_RETURN(auto s, GetString(v[i], fmt::format("{}[{}]", path, i)));
    out.push_back(std::move(s));
  }
  return out;
}

Expected<std::map<std::string, std::string>> GetStringMap(const json& v, const std::string& path) {
  if (!v.is_object()) return Fail(path, "must be an object of strings");
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : v.items()) {
    SMOLBOX_ASSIGN_OR_RETURN(auto s, GetString(value, Join(path, key)));
    out.emplace(key, std::move(s));
  }
  return out;
}

template <typename T>
using FieldParser = Expected<void> (*)(const json& value, const std::string& path, T& out);
template <typename T>
using FieldTable = std::map<std::string_view, FieldParser<T>>;

template <typename T>
Expected<void> ParseObject(const json& v, const std::string& path, const FieldTable<T>& table,
                           T& out) {
  if (!v.is_object()) return Fail(path.empty() ? "spec" : path, "must be an object");
  for (const auto& [key, value] : v.items()) {
    // An empty key is still named: as its JSON spelling, "".
    std::string field = Join(path, key.empty() ? "\"\"" : key);
    auto it = table.find(key);
    if (it == table.end()) return Fail(field, "unknown field");
    SMOLBOX_TRY(it->second(value, field, out));
  }
  return {};
}

template <auto Member, typename T>
Expected<void> SetString(const json& v, const std::string& path, T& out) {
  SMOLBOX_ASSIGN_OR_RETURN(auto s, GetString(v, path));
  out.*Member = std::move(s);
  return {};
}

// null means "unset" for the optional fields, so a spec can be written out whole.
template <auto Member, typename T>
Expected<void> SetOptionalString(const json& v, const std::string& path, T& out) {
  if (v.is_null()) return {};
  return SetString<Member>(v, path, out);
}

template <auto Member, typename T>
Expected<void> SetInteger(const json& v, const std::string& path, T& out) {
  SMOLBOX_ASSIGN_OR_RETURN(auto n, GetInteger(v, path));
  out.*Member = n;
  return {};
}

template <auto Member, typename T>
Expected<void> SetBool(const json& v, const std::string& path, T& out) {
  if (!v.is_boolean()) return Fail(path, "must be true or false");
  out.*Member = v.get<bool>();
  return {};
}

Expected<void> SetCpuMs(const json& v, const std::string& path, Limits& out) {
  if (v.is_null()) return {};
  return SetInteger<&Limits::cpu_ms>(v, path, out);
}

Expected<void> SetCpus(const json& v, const std::string& path, Limits& out) {
  if (!v.is_number()) return Fail(path, "must be a number");
  out.cpus = v.get<double>();
  return {};
}

const FieldTable<Limits>& LimitFields() {
  static const FieldTable<Limits> table = {
      {"timeout_ms", SetInteger<&Limits::timeout_ms>},
      {"cpu_ms", SetCpuMs},
      {"memory_mib", SetInteger<&Limits::memory_mib>},
      {"cpus", SetCpus},
      {"pids", SetInteger<&Limits::pids>},
      {"storage_mib", SetInteger<&Limits::storage_mib>},
      {"output_bytes", SetInteger<&Limits::output_bytes>},
      {"files", SetInteger<&Limits::files>},
  };
  return table;
}

Expected<void> SetMountMode(const json& v, const std::string& path, Mount& out) {
  SMOLBOX_ASSIGN_OR_RETURN(auto mode, GetString(v, path));
  if (mode != "ro" && mode != "rw") {
    return Fail(path, fmt::format("must be ro or rw (got {:?})", mode));
  }
  out.read_only = mode == "ro";
  return {};
}

Expected<Mount> ParseMount(const json& v, const std::string& path) {
  static const FieldTable<Mount> table = {
      {"source", SetString<&Mount::source>},
      {"target", SetString<&Mount::target>},
      {"mode", SetMountMode},
  };
  Mount mount;
  SMOLBOX_TRY(ParseObject(v, path, table, mount));
  for (std::string_view required : {"source", "target"}) {
    if (!v.contains(required)) return Fail(Join(path, required), "is required");
  }
  return mount;
}

Expected<void> SetMounts(const json& v, const std::string& path, SandboxSpec& out) {
  if (!v.is_array()) return Fail(path, "must be an array of mounts");
  for (size_t i = 0; i < v.size(); ++i) {
    SMOLBOX_ASSIGN_OR_RETURN(auto mount, ParseMount(v[i], fmt::format("{}[{}]", path, i)));
    out.mounts.push_back(std::move(mount));
  }
  return {};
}

Expected<void> SetBackend(const json& v, const std::string& path, SandboxSpec& out) {
  SMOLBOX_ASSIGN_OR_RETURN(auto name, GetString(v, path));
  SMOLBOX_ASSIGN_OR_RETURN(auto kind, ParseBackendKind(name));
  out.backend = kind;
  return {};
}

Expected<void> SetAccel(const json& v, const std::string& path, SandboxSpec& out) {
  SMOLBOX_ASSIGN_OR_RETURN(auto name, GetString(v, path));
  auto accel = ParseAccel(name);
  SMOLBOX_TRY(accel);
  out.accel = *accel;
  return {};
}

Expected<void> SetUser(const json& v, const std::string& path, SandboxSpec& out) {
  SMOLBOX_ASSIGN_OR_RETURN(auto name, GetString(v, path));
  SMOLBOX_ASSIGN_OR_RETURN(out.user, ParseWorkloadUser(name));
  return {};
}

Expected<void> SetNetwork(const json& v, const std::string& path, SandboxSpec& out) {
  if (!v.is_string() || v.get<std::string>() != "none") {
    return Fail(path, "only \"none\" is supported");
  }
  out.network = NetworkMode::kNone;
  return {};
}

// ---------------------------------------------------------------------------
// "egress": {"net": true, "allow_hosts": ["api.example.com:443"], ...}, as the flags are.

template <typename Rule, auto Parse, auto Member>
Expected<void> SetRules(const json& v, const std::string& path, EgressSpec& out) {
  SMOLBOX_ASSIGN_OR_RETURN(auto texts, GetStringArray(v, path));
  for (size_t i = 0; i < texts.size(); ++i) {
    SMOLBOX_ASSIGN_OR_RETURN(Rule rule, Parse(texts[i], fmt::format("{}[{}]", path, i)));
    (out.policy.*Member).push_back(std::move(rule));
  }
  return {};
}

Expected<void> SetOpen(const json& v, const std::string& path, EgressSpec& out) {
  if (!v.is_boolean()) return Fail(path, "must be true or false");
  out.policy.open = v.get<bool>();
  return {};
}

Expected<void> SetDnsServer(const json& v, const std::string& path, EgressSpec& out) {
  if (v.is_null()) return {};
  SMOLBOX_ASSIGN_OR_RETURN(auto text, GetString(v, path));
  SMOLBOX_ASSIGN_OR_RETURN(out.dns_server, ParseSocketAddress(text, 53, path));
  return {};
}

Expected<void> SetEgressLimit(const json& v, const std::string& path, EgressSpec& out) {
  if (v.is_null()) return {};
  SMOLBOX_ASSIGN_OR_RETURN(out.limit_bytes, GetInteger(v, path));
  return {};
}

Expected<void> SetEgress(const json& v, const std::string& path, SandboxSpec& out) {
  static const FieldTable<EgressSpec> table = {
      {"net", SetOpen},
      {"allow_hosts", SetRules<HostRule, ParseHostRule, &EgressPolicy::allow_hosts>},
      {"allow_cidrs", SetRules<CidrRule, ParseCidrRule, &EgressPolicy::allow_cidrs>},
      {"deny_cidrs", SetRules<Cidr, ParseCidr, &EgressPolicy::deny_cidrs>},
      {"dns_server", SetDnsServer},
      {"netns", SetString<&EgressSpec::netns, EgressSpec>},
      {"max_connections", SetInteger<&EgressSpec::max_connections, EgressSpec>},
      {"limit_bytes", SetEgressLimit},
  };
  return ParseObject(v, path, table, out.egress);
}

Expected<void> SetArgv(const json& v, const std::string& path, ExecSpec& out) {
  auto argv = GetStringArray(v, path);
  SMOLBOX_TRY(argv);
  out.argv = std::move(*argv);
  return {};
}

Expected<void> SetEntrypoint(const json& v, const std::string& path, ExecSpec& out) {
  SMOLBOX_ASSIGN_OR_RETURN(auto words, GetStringArray(v, path));
  out.entrypoint = std::move(words);
  return {};
}

Expected<void> SetEnv(const json& v, const std::string& path, ExecSpec& out) {
  auto env = GetStringMap(v, path);
  SMOLBOX_TRY(env);
  out.env = std::move(*env);
  return {};
}

// The document is flat, as a user writes it; each field lands in the sandbox's part or the
// exec's. "limits" holds both kinds.
Expected<void> SetLimits(const json& v, const std::string& path, RunSpec& out) {
  Limits limits = out.limits();
  SMOLBOX_TRY(ParseObject(v, path, LimitFields(), limits));
  out.set_limits(limits);
  return {};
}

template <auto Part, auto Parse>
Expected<void> In(const json& v, const std::string& path, RunSpec& out) {
  return Parse(v, path, out.*Part);
}
template <auto Parse>
constexpr FieldParser<RunSpec> kInSandbox = In<&RunSpec::sandbox, Parse>;
template <auto Parse>
constexpr FieldParser<RunSpec> kInExec = In<&RunSpec::exec, Parse>;

const FieldTable<RunSpec>& SpecFields() {
  static const FieldTable<RunSpec> table = {
      {"backend", kInSandbox<SetBackend>},
      {"accel", kInSandbox<SetAccel>},
      {"image", kInSandbox<SetString<&SandboxSpec::image, SandboxSpec>>},
      {"argv", kInExec<SetArgv>},
      {"entrypoint", kInExec<SetEntrypoint>},
      {"stdin", kInExec<SetOptionalString<&ExecSpec::stdin_data, ExecSpec>>},
      {"stdin_file", kInExec<SetOptionalString<&ExecSpec::stdin_file, ExecSpec>>},
      {"env", kInExec<SetEnv>},
      {"workdir", kInSandbox<SetString<&SandboxSpec::workdir, SandboxSpec>>},
      {"limits", SetLimits},
      {"network", kInSandbox<SetNetwork>},
      {"egress", kInSandbox<SetEgress>},
      {"mounts", kInSandbox<SetMounts>},
      {"user", kInSandbox<SetUser>},
      {"vm_snapshot", kInSandbox<SetBool<&SandboxSpec::vm_snapshot, SandboxSpec>>},
      {"ca_bundle", kInSandbox<SetString<&SandboxSpec::ca_bundle, SandboxSpec>>},
      {"prewarm", kInSandbox<SetString<&SandboxSpec::prewarm, SandboxSpec>>},
  };
  return table;
}

// nlohmann keeps the last of two equal keys without a word. A strict spec refuses
// them: a reviewer reading the first one would be misled about what runs.
//
// Each level keeps only its own key or index; the dotted path is built from them when a
// duplicate is found, so an event costs the same at any depth.
class DuplicateKeyFinder {
 public:
  bool OnEvent(json::parse_event_t event, const json& parsed) {
    using E = json::parse_event_t;
    if (event == E::object_start || event == E::array_start) {
      CountChild();
      stack_.push_back(Frame{event == E::array_start, 0, {}, {}});
    } else if (event == E::object_end || event == E::array_end) {
      stack_.pop_back();
    } else if (event == E::key) {
      Frame& frame = stack_.back();
      frame.key = parsed.get<std::string>();
      if (!frame.keys.insert(frame.key).second && !error_) {
        error_ = Error::Field(Join(PathOfTop(), frame.key), "duplicate field");
      }
    } else if (event == E::value) {
      CountChild();
    }
    return true;
  }
  const std::optional<Error>& error() const { return error_; }

 private:
  struct Frame {
    bool is_array;
    size_t children;  // in an array, the index of the next one
    std::set<std::string> keys;
    std::string key;  // in an object, the key of the member being read
  };

  void CountChild() {
    if (!stack_.empty() && stack_.back().is_array) ++stack_.back().children;
  }

  // "mounts[1]": each level names its child by the key or index it is reading.
  std::string PathOfTop() const {
    std::string path;
    for (size_t i = 0; i + 1 < stack_.size(); ++i) {
      const Frame& parent = stack_[i];
      if (parent.is_array) {
        path += fmt::format("[{}]", parent.children - 1);
      } else {
        path = Join(path, parent.key);
      }
    }
    return path;
  }

  std::vector<Frame> stack_;
  std::optional<Error> error_;
};

Expected<json> ParseJson(const std::string& text, std::string_view origin) {
  // Bounded before the parser sees it: a spec of 200,000 nested [ once took the machine's
  // memory. The size is the CLI's own cap on a --spec file.
  const JsonBounds bounds{.max_bytes = kMaxSpecBytes, .max_values = kMaxSpecValues};
  DuplicateKeyFinder finder;
  auto doc = ParseBoundedJson(text, bounds, origin,
                              [&finder](int, json::parse_event_t event, json& parsed) {
                                return finder.OnEvent(event, parsed);
                              });
  if (!doc) return doc;
  if (finder.error()) return std::unexpected(*finder.error());
  return doc;
}

// ---------------------------------------------------------------------------
// Validation: ranges, paths and combinations.

struct IntRange {
  std::string_view field;
  int64_t value;
  int64_t min;
  int64_t max;
  std::string_view unit;
};

Expected<void> CheckRange(const IntRange& r) {
  if (r.value >= r.min && r.value <= r.max) return {};
  std::string unit = r.unit.empty() ? "" : fmt::format(" {}", r.unit);
  return Fail(fmt::format("limits.{}", r.field),
              fmt::format("must be between {} and {}{} (got {})", r.min, r.max, unit, r.value));
}

// Either kind of limits, or both; in one fixed order, so that a spec with several bad limits
// is always told about the same one first.
Expected<void> CheckLimits(const ExecLimits* e, const SandboxLimits* s) {
  std::vector<IntRange> ranges;
  if (e) {
    ranges.push_back({"timeout_ms", e->timeout_ms, 1, kMaxTimeoutMs, "ms"});
    ranges.push_back({"cpu_ms", e->cpu_ms.value_or(1), 1, kMaxTimeoutMs, "ms"});
  }
  if (s) {
    ranges.push_back({"memory_mib", s->memory_mib, kMinMemoryMiB, kMaxMemoryMiB, "MiB"});
    ranges.push_back({"pids", s->pids, 1, kMaxPids, ""});
    ranges.push_back({"storage_mib", s->storage_mib, 1, kMaxStorageMiB, "MiB"});
  }
  if (e) {
    ranges.push_back({"output_bytes", e->output_bytes, 1, kMaxOutputBytes, "bytes"});
    ranges.push_back({"files", e->files, kMinFiles, kMaxFiles, ""});
  }
  for (const IntRange& range : ranges) {
    SMOLBOX_TRY(CheckRange(range));
  }
  // Written so that NaN fails too.
  if (s && !(s->cpus > 0 && s->cpus <= kMaxCpus)) {
    return Fail("limits.cpus",
                fmt::format("must be greater than 0 and at most {} (got {})", kMaxCpus, s->cpus));
  }
  return {};
}

Expected<void> CheckArgv(const ExecSpec& spec) {
  // Never dropped: a front end that skipped the image step fails rather than running argv alone.
  if (spec.entrypoint) return Fail("entrypoint", "was not applied: the image step (image::ResolveSpecImage) puts it in front of argv");
  if (spec.argv.empty() || spec.argv[0].empty()) return Fail("argv", "the command is empty");
  for (size_t i = 0; i < spec.argv.size(); ++i) {
    if (HasNul(spec.argv[i])) return Fail(fmt::format("argv[{}]", i), "contains a NUL byte");
  }
  return {};
}

Expected<void> CheckEnv(const ExecSpec& spec) {
  for (const auto& [key, value] : spec.env) {
    if (key.empty()) return Fail("env", "a variable name is empty");
    if (HasNul(key)) return Fail("env", fmt::format("variable name {:?} contains a NUL byte", key));
    if (key.find('=') != std::string::npos) {
      return Fail("env", fmt::format("variable name {:?} contains \"=\"", key));
    }
    if (HasNul(value)) return Fail(Join("env", key), "contains a NUL byte");
  }
  return {};
}

std::vector<std::string_view> Components(std::string_view path) {
  std::vector<std::string_view> out;
  while (!path.empty()) {
    size_t slash = path.find('/');
    std::string_view part = path.substr(0, slash);
    if (!part.empty()) out.push_back(part);
    path.remove_prefix(slash == std::string_view::npos ? path.size() : slash + 1);
  }
  return out;
}

// The sandbox mounts its own /proc, /dev and /sys; nothing may cover or reach into them.
std::optional<std::string> SystemDirOf(std::string_view path) {
  auto parts = Components(path);
  if (parts.empty()) return std::nullopt;
  for (std::string_view dir : {"proc", "dev", "sys"}) {
    if (parts[0] == dir) return fmt::format("/{}", dir);
  }
  return std::nullopt;
}

// Absolute, free of NUL and of "." and ".." components.
Expected<void> CheckGuestPath(std::string_view path, const std::string& field) {
  if (HasNul(path)) return Fail(field, "contains a NUL byte");
  if (path.empty() || path[0] != '/') {
    return Fail(field, fmt::format("must be an absolute path (got {:?})", path));
  }
  for (std::string_view part : Components(path)) {
    if (part == "." || part == "..") {
      return Fail(field, fmt::format("must not contain \".\" or \"..\" (got {})", Printable(path)));
    }
  }
  return {};
}

Expected<void> CheckWorkdir(const std::string& workdir) {
  SMOLBOX_TRY(CheckGuestPath(workdir, "workdir"));
  if (auto dir = SystemDirOf(workdir)) {
    return Fail("workdir", fmt::format("must not be under {} (got {})", *dir, Printable(workdir)));
  }
  return {};
}

// A failed stat() as an error: a missing path in words, anything else with errno.
Error StatError(const std::string& field, const std::string& path, int err) {
  if (err == ENOENT || err == ENOTDIR) {
    return Error::Field(field, fmt::format("{} does not exist", Printable(path)));
  }
  return Error{field, fmt::format("cannot stat {}", Printable(path)), err};
}

Expected<void> CheckStdin(const ExecSpec& spec) {
  if (!spec.stdin_file) return {};
  if (spec.stdin_data) return Fail("stdin_file", "cannot be combined with stdin");
  const std::string& path = *spec.stdin_file;
  if (HasNul(path)) return Fail("stdin_file", "contains a NUL byte");
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return std::unexpected(StatError("stdin_file", path, errno));
  // A pipe or terminal is fine too (`--stdin /dev/stdin`): the runtime streams it, any size.
  if (S_ISDIR(st.st_mode)) return Fail("stdin_file", fmt::format("{} is a directory", Printable(path)));
  return {};
}

Expected<void> CheckImage(const SandboxSpec& spec) {
  const std::string& image = spec.image;
  if (image == "host") return {};
  // A name reaches this only unresolved: the CLI resolves store names before validating.
  if (image.empty() || image[0] != '/' || HasNul(image)) {
    return Fail("image", fmt::format("no such local image {:?} (images are never pulled; "
                                     "add one with smolbox image import FILE)", image));
  }
  struct stat st {};
  if (stat(image.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return Fail("image", fmt::format("no such rootfs directory {}", Printable(image)));
    return std::unexpected(Error{"image", fmt::format("cannot stat {}", Printable(image)), errno});
  }
  if (!S_ISDIR(st.st_mode)) {
    return Fail("image", fmt::format("{} is not a directory", Printable(image)));
  }
  return {};
}

Expected<void> CheckMountTarget(const std::string& target, const std::string& field) {
  SMOLBOX_TRY(CheckGuestPath(target, field));
  if (target == "/") return Fail(field, "must not be /");
  if (target.find("//") != std::string::npos || target.back() == '/') {
    return Fail(field,
                fmt::format("must be normalized, without \"//\" or a trailing \"/\" (got {})",
                            Printable(target)));
  }
  if (auto dir = SystemDirOf(target)) {
    return Fail(field, fmt::format("{} shadows {}", Printable(target), *dir));
  }
  return {};
}

// Beneath a volume root: a relative path that stays there by its spelling. Opening it
// (OpenVolumes) is what holds it there, whatever links are planted meanwhile.
Expected<void> CheckSourceBeneathRoot(const std::string& source, const std::string& field) {
  if (HasNul(source)) return Fail(field, "contains a NUL byte");
  if (source.empty() || source[0] == '/') {
    return Fail(field, fmt::format("must be a path relative to the server's volume root (got {:?})", source));
  }
  for (const auto& part : std::filesystem::path(source)) {
    if (part == "..") return Fail(field, fmt::format("{} leads out of the volume root (\"..\")", Printable(source)));
  }
  return {};
}

// lstat(): a symlink as the source is refused rather than followed to wherever it points.
Expected<void> CheckMountSource(const std::string& source, const std::string& field, const std::string& volume_root) {
  if (!volume_root.empty()) return CheckSourceBeneathRoot(source, field);
  if (HasNul(source)) return Fail(field, "contains a NUL byte");
  if (source.empty() || source[0] != '/') {
    return Fail(field, fmt::format("must be an absolute path (got {:?})", source));
  }
  struct stat st {};
  if (lstat(source.c_str(), &st) != 0) return std::unexpected(StatError(field, source, errno));
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
    return Fail(field, fmt::format("{} is not a directory or a regular file", Printable(source)));
  }
  return {};
}

Expected<void> CheckMounts(const SandboxSpec& spec) {
  std::map<std::string, size_t> targets;
  for (size_t i = 0; i < spec.mounts.size(); ++i) {
    const Mount& m = spec.mounts[i];
    std::string field = fmt::format("mounts[{}]", i);
    SMOLBOX_TRY(CheckMountTarget(m.target, field + ".target"));
    auto [it, inserted] = targets.emplace(m.target, i);
    if (!inserted) {
      return Fail(field + ".target", fmt::format("{} is also the target of mounts[{}]",
                                                 Printable(m.target), it->second));
    }
    if (m.scratch && (m.read_only || !m.source.empty())) return Fail(field, "a scratch directory is rw and has no source");
    if (!m.scratch) SMOLBOX_TRY(CheckMountSource(m.source, field + ".source", spec.volume_root));
  }
  return {};
}

Expected<void> CheckEgress(const EgressSpec& egress) {
  if (egress.max_connections < 1 || egress.max_connections > kMaxEgressConnections) {
    return Fail("egress.max_connections", fmt::format("must be 1 to {}", kMaxEgressConnections));
  }
  if (egress.limit_bytes && *egress.limit_bytes < 1) return Fail("egress.limit_bytes", "must be at least 1");
  if (!egress.netns.empty() && (!egress.netns.starts_with('/') || HasNul(egress.netns))) {
    return Fail("egress.netns", "must be an absolute path to a network namespace file");
  }
  return {};
}

}  // namespace

std::vector<std::string> RunSpecFieldNames() {
  std::vector<std::string> names;
  for (const auto& [name, unused] : SpecFields()) {
    if (name != "limits") names.emplace_back(name);
  }
  for (const auto& [name, unused] : LimitFields()) names.push_back("limits." + std::string(name));
  return names;
}

Expected<RunSpec> ParseRunSpec(const std::string& json_text, std::string_view origin) {
  SMOLBOX_ASSIGN_OR_RETURN(auto doc, ParseJson(json_text, origin));
  if (!doc.is_object()) return Fail(std::string(origin), "must be an object");
  RunSpec spec;
  SMOLBOX_TRY(ParseObject(doc, "", SpecFields(), spec));
  return spec;
}

// The checks that need no host access come first; then the ones that stat.
Expected<void> ValidateRunSpec(const RunSpec& spec) {
  // Its zygote serves the execs after the first: a run has only one.
  if (!spec.sandbox.prewarm.empty()) return Fail("prewarm", "is for a created sandbox's execs; a run has only one");
  SMOLBOX_TRY(CheckArgv(spec.exec));
  SMOLBOX_TRY(CheckEnv(spec.exec));
  SMOLBOX_TRY(CheckLimits(&spec.exec.limits, &spec.sandbox.limits));
  SMOLBOX_TRY(CheckWorkdir(spec.sandbox.workdir));
  if (spec.exec.workdir) SMOLBOX_TRY(CheckWorkdir(*spec.exec.workdir));
  SMOLBOX_TRY(CheckStdin(spec.exec));
  SMOLBOX_TRY(CheckCaBundle(spec.sandbox.ca_bundle));
  SMOLBOX_TRY(CheckImage(spec.sandbox));
  return CheckMounts(spec.sandbox);
}

Expected<void> ValidateSandboxSpec(const SandboxSpec& spec) {
  SMOLBOX_TRY(CheckLimits(nullptr, &spec.limits));
  SMOLBOX_TRY(CheckEgress(spec.egress));
  SMOLBOX_TRY(CheckWorkdir(spec.workdir));
  SMOLBOX_TRY(CheckCaBundle(spec.ca_bundle));
  SMOLBOX_TRY(CheckImage(spec));
  if (!spec.prewarm.empty() && spec.prewarm != "python") {
    return Fail("prewarm", fmt::format("must be python (got {:?})", spec.prewarm));
  }
  if (!spec.prewarm.empty() && spec.backend == BackendKind::kNs) return Fail("prewarm", "needs the vm backend");
  return CheckMounts(spec);
}

Expected<void> ValidateExecSpec(const ExecSpec& spec) {
  SMOLBOX_TRY(CheckArgv(spec));
  return ValidateExecDefaults(spec);
}

Expected<void> ValidateExecDefaults(const ExecSpec& spec) {
  SMOLBOX_TRY(CheckEnv(spec));
  SMOLBOX_TRY(CheckLimits(&spec.limits, nullptr));
  if (spec.workdir) SMOLBOX_TRY(CheckWorkdir(*spec.workdir));
  return CheckStdin(spec);
}

std::string ToString(BackendKind kind) {
  switch (kind) {
    case BackendKind::kAuto:
      return "auto";
    case BackendKind::kNs:
      return "ns";
    case BackendKind::kVm:
      return "vm";
  }
  return "unknown";
}

std::string ToString(const WorkloadUser& user) {
  if (user == WorkloadUser::Sandbox()) return "sandbox";
  if (user == WorkloadUser::Root()) return "root";
  return fmt::format("{}:{}", user.uid, user.gid);
}

Expected<BackendKind> ParseBackendKind(const std::string& name) {
  for (BackendKind kind : {BackendKind::kAuto, BackendKind::kNs, BackendKind::kVm}) {
    if (name == ToString(kind)) return kind;
  }
  return Fail("backend", fmt::format("must be auto, ns or vm (got {:?})", name));
}

std::string ToString(Accel accel) {
  switch (accel) {
    case Accel::kAuto:
      return "auto";
    case Accel::kKvm:
      return "kvm";
    case Accel::kTcg:
      return "tcg";
  }
  return "unknown";
}

Expected<Accel> ParseAccel(const std::string& name) {
  for (Accel accel : {Accel::kAuto, Accel::kKvm, Accel::kTcg}) {
    if (name == ToString(accel)) return accel;
  }
  return Fail("accel", fmt::format("must be auto, kvm or tcg (got {:?})", name));
}

Expected<WorkloadUser> ParseWorkloadUser(const std::string& text) {
  if (text == "sandbox") return WorkloadUser::Sandbox();
  if (text == "root") return WorkloadUser::Root();
  auto id = [&](std::string_view digits) -> std::optional<uint32_t> {
    uint32_t value = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (ec != std::errc{} || end != digits.data() + digits.size() || digits.empty() || value > kMaxWorkloadId) return std::nullopt;
    return value;
  };
  size_t colon = text.find(':');
  auto uid = id(std::string_view(text).substr(0, colon));
  auto gid = colon == std::string::npos ? uid : id(std::string_view(text).substr(colon + 1));
  if (!uid || !gid) {
    return Fail("user", fmt::format("must be sandbox, root or UID[:GID] with ids 0 to {} (got {:?})", kMaxWorkloadId, text));
  }
  return WorkloadUser{*uid, *gid};
}

Expected<Mount> ParseVolume(const std::string& text) {
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    size_t colon = text.find(':', start);
    parts.push_back(text.substr(start, colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (parts.size() < 2 || parts.size() > 3 || parts[0].empty() || parts[1].empty()) {
    return Fail("--volume", fmt::format("expected HOST:GUEST[:ro|rw] (got {:?})", text));
  }
  Mount mount{parts[0], parts[1], false};
  if (parts.size() == 3) {
    if (parts[2] != "ro" && parts[2] != "rw") {
      return Fail("--volume", fmt::format("mode must be ro or rw (got {:?})", parts[2]));
    }
    mount.read_only = parts[2] == "ro";
  }
  return mount;
}

}  // namespace smolbox
