#include "oci_config.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <set>

#include "json_bounds.h"
#include "unique_fd.h"

namespace smolbox::oci {
namespace {

using nlohmann::json;

std::unexpected<Error> Fail(const std::string& field, const std::string& why) {
  return std::unexpected(Error::Field(field, why));
}

// The value at key, or null when it is missing; a present value of the wrong kind is an error.
Expected<const json*> Member(const json& object, const char* key, const std::string& path,
                             json::value_t kind) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  bool number = kind == json::value_t::number_integer;
  bool fits = number ? it->is_number_integer() : it->type() == kind;
  if (!fits) {
    const char* noun = number                           ? "an integer"
                       : kind == json::value_t::string  ? "a string"
                       : kind == json::value_t::boolean ? "true or false"
                       : kind == json::value_t::array   ? "an array"
                                                        : "an object";
    return Fail(path + key, fmt::format("must be {}", noun));
  }
  return &*it;
}

Expected<int64_t> Integer(const json& value, const std::string& field) {
  if (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(INT64_MAX))
    return Fail(field, "is out of range");
  return value.get<int64_t>();
}

// The keys of object that no table entry names: a field nobody maps is refused, never ignored.
Expected<void> OnlyKnownKeys(const json& object, const std::string& path,
                             const std::set<std::string>& known) {
  for (const auto& [key, value] : object.items()) {
    if (!known.contains(key)) return Fail(path + key, "is not supported by smolbox");
  }
  return {};
}

void Replaced(OciContainer& out, const std::string& field, const std::string& by) {
  out.notes.push_back(fmt::format("{}: not applied; {}", field, by));
}

Expected<void> ParseUser(const json& user, OciContainer& out) {
  SMOLBOX_TRY(
      OnlyKnownKeys(user, "process.user.", {"uid", "gid", "umask", "additionalGids", "username"}));
  uint32_t ids[2] = {0, 0};
  const char* names[2] = {"uid", "gid"};
  for (int i = 0; i < 2; ++i) {
    SMOLBOX_ASSIGN_OR_RETURN(
        auto id, Member(user, names[i], "process.user.", json::value_t::number_integer));
    if (!id) continue;
    SMOLBOX_ASSIGN_OR_RETURN(int64_t value, Integer(*id, std::string("process.user.") + names[i]));
    if (value < 0 || value > kMaxWorkloadId) {
      return Fail(std::string("process.user.") + names[i],
                  fmt::format("must be 0 to {}: a sandbox maps ids 0-{} (got {})", kMaxWorkloadId,
                              kMaxWorkloadId, value));
    }
    ids[i] = static_cast<uint32_t>(value);
  }
  out.run.sandbox.user = WorkloadUser{ids[0], ids[1]};
  if (user.contains("additionalGids"))
    Replaced(out, "process.user.additionalGids", "a smolbox workload has no supplementary groups");
  if (user.contains("umask"))
    Replaced(out, "process.user.umask", "the workload starts with umask 022");
  return {};
}

Expected<void> ParseEnv(const json& env, ExecSpec& exec) {
  for (size_t i = 0; i < env.size(); ++i) {
    std::string field = fmt::format("process.env[{}]", i);
    if (!env[i].is_string()) return Fail(field, "must be a string");
    const std::string& entry = env[i].get_ref<const std::string&>();
    size_t equals = entry.find('=');
    if (equals == 0 || equals == std::string::npos) return Fail(field, "must be NAME=VALUE");
    exec.env[entry.substr(0, equals)] = entry.substr(equals + 1);
  }
  return {};
}

// RLIMIT_NOFILE and RLIMIT_CPU are the exec's own limits; the rest are held by the sandbox's
// cgroup and seccomp policy instead.
Expected<void> ParseRlimits(const json& rlimits, OciContainer& out) {
  for (size_t i = 0; i < rlimits.size(); ++i) {
    std::string path = fmt::format("process.rlimits[{}].", i);
    const json& limit = rlimits[i];
    if (!limit.is_object()) return Fail(path.substr(0, path.size() - 1), "must be an object");
    SMOLBOX_TRY(OnlyKnownKeys(limit, path, {"type", "soft", "hard"}));
    SMOLBOX_ASSIGN_OR_RETURN(auto type, Member(limit, "type", path, json::value_t::string));
    SMOLBOX_ASSIGN_OR_RETURN(auto soft, Member(limit, "soft", path, json::value_t::number_integer));
    if (!type || !soft) return Fail(path + (type ? "soft" : "type"), "is required");
    SMOLBOX_ASSIGN_OR_RETURN(int64_t value, Integer(*soft, path + "soft"));
    const std::string& name = type->get_ref<const std::string&>();
    if (name == "RLIMIT_NOFILE") {
      if (value < kMinFiles || value > kMaxFiles) {
        return Fail(path + "soft", fmt::format("RLIMIT_NOFILE must be {} to {} (got {})", kMinFiles,
                                               kMaxFiles, value));
      }
      out.run.exec.limits.files = value;
    } else if (name == "RLIMIT_CPU") {
      if (value < 1 || value > kMaxTimeoutMs / 1000)
        return Fail(path + "soft", "RLIMIT_CPU must be 1 to 86400 seconds");
      out.run.exec.limits.cpu_ms = value * 1000;
    } else if (name.starts_with("RLIMIT_")) {
      Replaced(out, path + "type " + name,
               "the sandbox's cgroup and seccomp policy bound the workload instead");
    } else {
      return Fail(path + "type", fmt::format("is not an rlimit (got {:?})", name));
    }
  }
  return {};
}

Expected<void> ParseProcess(const json& process, OciContainer& out) {
  SMOLBOX_TRY(
      OnlyKnownKeys(process, "process.",
                    {"terminal", "consoleSize", "user", "args", "env", "cwd", "capabilities",
                     "rlimits", "noNewPrivileges", "apparmorProfile", "selinuxLabel", "oomScoreAdj",
                     "scheduler", "ioPriority", "execCPUAffinity"}));
  SMOLBOX_ASSIGN_OR_RETURN(auto args, Member(process, "args", "process.", json::value_t::array));
  if (!args || args->empty()) return Fail("process.args", "must name the program to run");
  for (size_t i = 0; i < args->size(); ++i) {
    if (!(*args)[i].is_string())
      return Fail(fmt::format("process.args[{}]", i), "must be a string");
    out.run.exec.argv.push_back((*args)[i].get<std::string>());
  }
  SMOLBOX_ASSIGN_OR_RETURN(auto cwd, Member(process, "cwd", "process.", json::value_t::string));
  if (!cwd) return Fail("process.cwd", "is required");
  // The sandbox's writable storage is at /tmp, so that it never hides the image's own cwd.
  out.run.sandbox.workdir = "/tmp";
  out.run.exec.workdir = cwd->get<std::string>();
  SMOLBOX_ASSIGN_OR_RETURN(auto terminal,
                           Member(process, "terminal", "process.", json::value_t::boolean));
  out.terminal = terminal && terminal->get<bool>();
  SMOLBOX_ASSIGN_OR_RETURN(auto user, Member(process, "user", "process.", json::value_t::object));
  if (user) SMOLBOX_TRY(ParseUser(*user, out));
  SMOLBOX_ASSIGN_OR_RETURN(auto env, Member(process, "env", "process.", json::value_t::array));
  if (env) SMOLBOX_TRY(ParseEnv(*env, out.run.exec));
  SMOLBOX_ASSIGN_OR_RETURN(auto rlimits,
                           Member(process, "rlimits", "process.", json::value_t::array));
  if (rlimits) SMOLBOX_TRY(ParseRlimits(*rlimits, out));
  if (process.contains("capabilities"))
    Replaced(out, "process.capabilities", "a smolbox workload has no capabilities");
  if (process.value("noNewPrivileges", true) == false)
    Replaced(out, "process.noNewPrivileges false", "smolbox always sets no_new_privs");
  for (const char* key : {"apparmorProfile", "selinuxLabel", "oomScoreAdj", "scheduler",
                          "ioPriority", "execCPUAffinity"}) {
    if (process.contains(key))
      Replaced(out, std::string("process.") + key, "smolbox's own confinement holds the workload");
  }
  return {};
}

Expected<void> ParseRoot(const json& root, const std::string& bundle, OciContainer& out) {
  SMOLBOX_TRY(OnlyKnownKeys(root, "root.", {"path", "readonly"}));
  SMOLBOX_ASSIGN_OR_RETURN(auto path, Member(root, "path", "root.", json::value_t::string));
  if (!path || path->get_ref<const std::string&>().empty()) return Fail("root.path", "is required");
  std::string rootfs = path->get<std::string>();
  if (rootfs.find('\0') != std::string::npos) return Fail("root.path", "contains a NUL byte");
  if (!rootfs.starts_with('/')) rootfs = bundle + "/" + rootfs;
  struct stat st {};
  if (lstat(rootfs.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Fail("root.path", fmt::format("{} is not a directory", rootfs));
  }
  out.run.sandbox.image = rootfs;
  SMOLBOX_ASSIGN_OR_RETURN(auto readonly,
                           Member(root, "readonly", "root.", json::value_t::boolean));
  out.run.sandbox.writable_root = !(readonly && readonly->get<bool>());
  return {};
}

// The kernel filesystems every engine lists, at the places it lists them: smolbox's setup
// makes its own (a /proc of the sandbox's pid namespace, a /dev of a few devices, its own
// devpts, /dev/shm on the storage), or leaves them out. Its value: what smolbox gives there.
const std::map<std::string, std::string>& StandardMounts() {
  static const std::map<std::string, std::string> mounts = {
      {"/proc", ""},
      {"/dev", ""},
      {"/dev/pts", ""},
      {"/dev/shm", ""},
      {"/dev/mqueue", "no POSIX message queue filesystem is mounted"},
      {"/sys", "no /sys is mounted: it would show the host's devices"},
      {"/sys/fs/cgroup", "no cgroup filesystem is mounted"},
  };
  return mounts;
}

bool IsBind(const json& mount) {
  if (mount.value("type", "") == "bind") return true;
  for (const auto& option : mount.value("options", json::array())) {
    if (option == "bind" || option == "rbind") return true;
  }
  return false;
}

// A tmpfs is an empty rw directory of the sandbox's storage: gone with the container, as a
// tmpfs is, and held by the storage limit as a whole rather than by its own size.
Expected<void> ParseTmpfs(const json& mount, const std::string& path, const std::string& target,
                          OciContainer& out) {
  for (const auto& option : mount.value("options", json::array())) {
    if (option == "ro") return Fail(path + "options", "a read-only tmpfs is not supported");
    if (option.is_string() && option.get<std::string>().starts_with("size=")) {
      Replaced(out, path + "options " + option.get<std::string>(),
               "the storage limit holds the tmpfs with the rest");
    }
  }
  Mount scratch{"", target, false};
  scratch.scratch = true;
  out.run.sandbox.mounts.push_back(std::move(scratch));
  return {};
}

// A regular file of at most kMaxRootFileBytes, read whole; nullopt for anything else.
std::optional<std::string> SmallFile(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  struct stat st {};
  if (!fd.valid() || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<size_t>(st.st_size) > kMaxRootFileBytes) {
    return std::nullopt;
  }
  std::string text(static_cast<size_t>(st.st_size) + 1, '\0');
  size_t size = 0;
  for (ssize_t n;
       size < text.size() && (n = read(fd.get(), text.data() + size, text.size() - size)) > 0;)
    size += static_cast<size_t>(n);
  if (size > kMaxRootFileBytes) return std::nullopt;  // it grew meanwhile
  text.resize(size);
  return text;
}

bool IsNormalFilePath(const std::string& path) {
  return path.size() > 1 && path.starts_with("/") && !path.ends_with("/") &&
         std::filesystem::path(path).lexically_normal() == path;
}

Expected<void> ParseMount(const json& mount, size_t index, OciContainer& out) {
  std::string path = fmt::format("mounts[{}].", index);
  if (!mount.is_object()) return Fail(path.substr(0, path.size() - 1), "must be an object");
  SMOLBOX_TRY(OnlyKnownKeys(
      mount, path, {"destination", "type", "source", "options", "uidMappings", "gidMappings"}));
  SMOLBOX_ASSIGN_OR_RETURN(auto destination,
                           Member(mount, "destination", path, json::value_t::string));
  if (!destination) return Fail(path + "destination", "is required");
  const std::string& target = destination->get_ref<const std::string&>();
  if (auto standard = StandardMounts().find(target);
      standard != StandardMounts().end() && !IsBind(mount)) {
    if (!standard->second.empty()) Replaced(out, path + "destination " + target, standard->second);
    return {};
  }
  if (mount.value("type", "") == "tmpfs" && !IsBind(mount))
    return ParseTmpfs(mount, path, target, out);
  if (!IsBind(mount)) {
    return Fail(path + "type", fmt::format("a {:?} mount at {} is not supported: smolbox mounts "
                                           "host directories (bind) and tmpfs only",
                                           mount.value("type", ""), target));
  }
  if (mount.contains("uidMappings") || mount.contains("gidMappings"))
    return Fail(path + "uidMappings", "idmapped mounts are not supported");
  SMOLBOX_ASSIGN_OR_RETURN(auto source, Member(mount, "source", path, json::value_t::string));
  if (!source) return Fail(path + "source", "is required for a bind mount");
  Mount bind{source->get<std::string>(), target, false};
  SMOLBOX_ASSIGN_OR_RETURN(auto options, Member(mount, "options", path, json::value_t::array));
  for (const auto& option : options ? *options : json::array()) {
    if (option == "ro") bind.read_only = true;
  }
  // A /dev/shm that the engine keeps for the container is the storage's own in smolbox.
  if (target == "/dev/shm") return {};
  // The files an engine writes for a container (/etc/hosts, resolv.conf, hostname,
  // /run/.containerenv) become the root's own files: a copy shows nothing of the host.
  if (auto copied = SmallFile(bind.source);
      copied && IsNormalFilePath(target) && out.run.sandbox.root_files.size() < kMaxRootFiles) {
    out.run.sandbox.root_files[target] = std::move(*copied);
    return {};
  }
  // A larger file is bound; smolbox copies back only directories, so it is the container's to
  // read.
  struct stat st {};
  if (!bind.read_only && stat(bind.source.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    bind.read_only = true;
    Replaced(out, path + "options rw", fmt::format("{} is a file, bound read-only", target));
  }
  out.run.sandbox.mounts.push_back(std::move(bind));
  return {};
}

const std::set<std::string>& DefaultDevices() {
  static const std::set<std::string> devices = {"/dev/null",   "/dev/zero",    "/dev/full",
                                                "/dev/random", "/dev/urandom", "/dev/tty"};
  return devices;
}

// linux.resources.KEY, an object, or an empty one where it is missing.
Expected<json> ResourceObject(const json& resources, const char* key) {
  SMOLBOX_ASSIGN_OR_RETURN(auto found,
                           Member(resources, key, "linux.resources.", json::value_t::object));
  return found ? *found : json::object();
}

// An integer field, or nothing where it is missing; a value of another kind is an error.
Expected<std::optional<int64_t>> OptionalInteger(const json& object, const char* key,
                                                 const std::string& path) {
  SMOLBOX_ASSIGN_OR_RETURN(auto found, Member(object, key, path, json::value_t::number_integer));
  if (!found) return std::optional<int64_t>();
  SMOLBOX_ASSIGN_OR_RETURN(int64_t value, Integer(*found, path + key));
  return std::optional<int64_t>(value);
}

Expected<void> ParseResources(const json& resources, OciContainer& out) {
  SMOLBOX_TRY(OnlyKnownKeys(resources, "linux.resources.",
                            {"memory", "cpu", "pids", "devices", "blockIO", "hugepageLimits",
                             "network", "rdma", "unified"}));
  SandboxLimits& limits = out.run.sandbox.limits;
  SMOLBOX_ASSIGN_OR_RETURN(json memory, ResourceObject(resources, "memory"));
  SMOLBOX_ASSIGN_OR_RETURN(auto bytes, OptionalInteger(memory, "limit", "linux.resources.memory."));
  if (bytes && *bytes > 0) {
    int64_t mib = *bytes / (1 << 20) + (*bytes % (1 << 20) != 0);
    if (mib < kMinMemoryMiB || mib > kMaxMemoryMiB) {
      return Fail("linux.resources.memory.limit",
                  fmt::format("must be {} MiB to {} GiB (got {} bytes)", kMinMemoryMiB,
                              kMaxMemoryMiB >> 10, *bytes));
    }
    limits.memory_mib = mib;
  }
  SMOLBOX_ASSIGN_OR_RETURN(json pids, ResourceObject(resources, "pids"));
  SMOLBOX_ASSIGN_OR_RETURN(auto count, OptionalInteger(pids, "limit", "linux.resources.pids."));
  if (count && *count > kMaxPids) {
    return Fail("linux.resources.pids.limit",
                fmt::format("must be at most {} (got {})", kMaxPids, *count));
  }
  if (count && *count > 0) limits.pids = *count;
  SMOLBOX_ASSIGN_OR_RETURN(json cpu, ResourceObject(resources, "cpu"));
  SMOLBOX_ASSIGN_OR_RETURN(auto quota, OptionalInteger(cpu, "quota", "linux.resources.cpu."));
  SMOLBOX_ASSIGN_OR_RETURN(auto period, OptionalInteger(cpu, "period", "linux.resources.cpu."));
  if (quota && *quota > 0) {
    if (period && *period <= 0) return Fail("linux.resources.cpu.period", "must be positive");
    double cpus = double(*quota) / double(period.value_or(100000));
    if (cpus < 0.01 || cpus > kMaxCpus)
      return Fail("linux.resources.cpu.quota", fmt::format("must give 0.01 to {} CPUs", kMaxCpus));
    limits.cpus = cpus;
  }
  for (const char* key : {"cpus", "mems", "realtimeRuntime", "realtimePeriod"}) {
    if (cpu.contains(key) && !cpu[key].is_null() && cpu[key] != "" && cpu[key] != 0) {
      return Fail(std::string("linux.resources.cpu.") + key, "is not supported by smolbox");
    }
  }
  SMOLBOX_ASSIGN_OR_RETURN(auto shares, OptionalInteger(cpu, "shares", "linux.resources.cpu."));
  if (shares && *shares != 0) {
    if (*shares < 2 || *shares > 262144)
      return Fail("linux.resources.cpu.shares",
                  fmt::format("must be 2 to 262144 (got {})", *shares));
    out.run.sandbox.cpu_shares = *shares;
  }
  if (resources.contains("devices"))
    Replaced(out, "linux.resources.devices",
             "smolbox's /dev holds only null, zero, full, random, urandom, tty and its own pts");
  for (const char* key : {"hugepageLimits", "rdma", "unified"}) {
    if (resources.contains(key) && !resources[key].empty())
      return Fail(std::string("linux.resources.") + key, "is not supported by smolbox");
  }
  for (const char* key : {"blockIO", "network"}) {
    if (resources.contains(key))
      Replaced(out, std::string("linux.resources.") + key,
               "smolbox holds the sandbox's storage by size");
  }
  return {};
}

Expected<void> ParseNamespaces(const json& namespaces, OciContainer& out) {
  static const std::set<std::string> kinds = {"pid", "network", "mount",  "ipc",
                                              "uts", "user",    "cgroup", "time"};
  for (size_t i = 0; i < namespaces.size(); ++i) {
    std::string path = fmt::format("linux.namespaces[{}].", i);
    const json& ns = namespaces[i];
    if (!ns.is_object()) return Fail(path.substr(0, path.size() - 1), "must be an object");
    SMOLBOX_TRY(OnlyKnownKeys(ns, path, {"type", "path"}));
    std::string type = ns.value("type", "");
    if (!kinds.contains(type))
      return Fail(path + "type", fmt::format("is not a namespace type (got {:?})", type));
    SMOLBOX_ASSIGN_OR_RETURN(auto joined, Member(ns, "path", path, json::value_t::string));
    if (!joined || joined->get_ref<const std::string&>().empty()) continue;
    if (type != "network") {
      return Fail(path + "path",
                  fmt::format("joining a {} namespace is not supported: smolbox makes every "
                              "namespace of the sandbox but the network's",
                              type));
    }
    if (!joined->get_ref<const std::string&>().starts_with('/'))
      return Fail(path + "path", "must be an absolute path");
    out.run.sandbox.network_namespace = joined->get<std::string>();
  }
  return {};
}

Expected<void> ParseLinux(const json& linux, OciContainer& out) {
  SMOLBOX_TRY(OnlyKnownKeys(
      linux, "linux.",
      {"namespaces", "uidMappings", "gidMappings", "timeOffsets", "devices", "cgroupsPath",
       "resources", "rootfsPropagation", "seccomp", "sysctl", "maskedPaths", "readonlyPaths",
       "mountLabel", "intelRdt", "personality", "netDevices"}));
  SMOLBOX_ASSIGN_OR_RETURN(auto namespaces,
                           Member(linux, "namespaces", "linux.", json::value_t::array));
  if (namespaces) SMOLBOX_TRY(ParseNamespaces(*namespaces, out));
  SMOLBOX_ASSIGN_OR_RETURN(auto resources,
                           Member(linux, "resources", "linux.", json::value_t::object));
  if (resources) SMOLBOX_TRY(ParseResources(*resources, out));
  SMOLBOX_ASSIGN_OR_RETURN(auto devices, Member(linux, "devices", "linux.", json::value_t::array));
  for (size_t i = 0; devices && i < devices->size(); ++i) {
    std::string device = (*devices)[i].is_object() ? (*devices)[i].value("path", "") : "";
    if (!DefaultDevices().contains(device)) {
      return Fail(
          fmt::format("linux.devices[{}]", i),
          fmt::format("device {:?} is not supported: smolbox passes no host device", device));
    }
  }
  for (const char* key : {"intelRdt", "personality", "netDevices", "timeOffsets"}) {
    if (linux.contains(key) && !linux[key].empty())
      return Fail(std::string("linux.") + key, "is not supported by smolbox");
  }
  static const std::map<std::string, std::string> replaced = {
      {"uidMappings", "the sandbox maps ids 0-65535 to unprivileged host ids of its own"},
      {"gidMappings", "the sandbox maps ids 0-65535 to unprivileged host ids of its own"},
      {"cgroupsPath", "smolbox holds the sandbox in cgroups of its own"},
      {"seccomp", "smolbox's own seccomp policy applies"},
      {"sysctl", "the sandbox's kernel settings are smolbox's"},
      {"maskedPaths", "smolbox's /proc is the sandbox's own and it mounts no /sys"},
      {"readonlyPaths", "smolbox's /proc is the sandbox's own and it mounts no /sys"},
      {"rootfsPropagation", "the sandbox's mounts are private"},
      {"mountLabel", "smolbox applies no SELinux label"},
  };
  for (const auto& [key, by] : replaced) {
    if (linux.contains(key) && !linux[key].empty()) Replaced(out, "linux." + key, by);
  }
  return {};
}

Expected<int64_t> AnnotationInteger(const json& annotations, const char* key, int64_t low,
                                    int64_t high) {
  std::string field = std::string("annotations.") + key;
  const json& value = annotations[key];
  if (!value.is_string()) return Fail(field, "must be a string");
  const std::string& text = value.get_ref<const std::string&>();
  int64_t number = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc{} || end != text.data() + text.size() || number < low || number > high) {
    return Fail(field, fmt::format("must be an integer from {} to {} (got {:?})", low, high, text));
  }
  return number;
}

// The egress annotation is the spec's "egress" object, read by the spec's own parser; the
// operator's fields (dns_server, netns) are not a container's to set.
Expected<void> ParseEgressAnnotation(const json& value, OciContainer& out) {
  std::string field = std::string("annotations.") + kEgressAnnotation;
  if (!value.is_string()) return Fail(field, "must be a string holding the spec's egress JSON");
  auto spec = ParseRunSpec(
      fmt::format(R"({{"argv": ["/"], "egress": {}}})", value.get<std::string>()), field);
  if (!spec)
    return Fail(
        spec.error().where.starts_with("egress") ? field + spec.error().where.substr(6) : field,
        spec.error().what);
  if (spec->sandbox.egress.dns_server || !spec->sandbox.egress.netns.empty()) {
    return Fail(field, "dns_server and netns are the operator's: a container may not set them");
  }
  out.run.sandbox.egress = spec->sandbox.egress;
  return {};
}

Expected<void> ParseAnnotations(const json& annotations, BackendKind backend, OciContainer& out) {
  out.run.sandbox.backend = backend == BackendKind::kAuto ? BackendKind::kNs : backend;
  for (const auto& [key, value] : annotations.items()) {
    std::string field = "annotations." + key;
    if (!value.is_string()) return Fail(field, "must be a string");
    out.annotations[key] = value.get<std::string>();
    if (!key.starts_with("io.smolbox.")) continue;
    if (key == kBackendAnnotation) {
      auto kind =
          value.is_string() ? ParseBackendKind(value.get<std::string>()) : std::unexpected(Error{});
      if (!kind || *kind == BackendKind::kAuto) return Fail(field, "must be \"ns\" or \"vm\"");
      if (backend != BackendKind::kAuto && *kind != backend) {
        return Fail(field, fmt::format("asks for {} but the runtime runs {} (--backend)",
                                       ToString(*kind), ToString(backend)));
      }
      out.run.sandbox.backend = *kind;
    } else if (key == kStorageAnnotation) {
      SMOLBOX_ASSIGN_OR_RETURN(
          out.run.sandbox.limits.storage_mib,
          AnnotationInteger(annotations, kStorageAnnotation, 1, kMaxStorageMiB));
    } else if (key == kOutputAnnotation) {
      SMOLBOX_ASSIGN_OR_RETURN(
          out.run.exec.limits.output_bytes,
          AnnotationInteger(annotations, kOutputAnnotation, 1, kMaxOutputBytes));
    } else if (key == kTimeoutAnnotation) {
      SMOLBOX_ASSIGN_OR_RETURN(
          out.run.exec.limits.timeout_ms,
          AnnotationInteger(annotations, kTimeoutAnnotation, 1, kMaxTimeoutMs));
    } else if (key == kAccelAnnotation) {
      auto accel = ParseAccel(value.get<std::string>());
      if (!accel) return Fail(field, "must be \"kvm\", \"tcg\" or \"auto\"");
      out.run.sandbox.accel = *accel;
    } else if (key == kCpuTimeAnnotation) {
      SMOLBOX_ASSIGN_OR_RETURN(
          out.run.exec.limits.cpu_ms,
          AnnotationInteger(annotations, kCpuTimeAnnotation, 1, kMaxTimeoutMs));
    } else if (key == kEgressAnnotation) {
      SMOLBOX_TRY(ParseEgressAnnotation(value, out));
    } else {
      return Fail(field,
                  "is not a smolbox annotation (io.smolbox.backend, accel, storage-mib, "
                  "output-bytes, timeout-ms, cpu-ms, egress)");
    }
  }
  return {};
}

bool ListsNetworkNamespace(const json& config) {
  for (const auto& ns : config.value("linux", json::object()).value("namespaces", json::array())) {
    if (ns.is_object() && ns.value("type", "") == "network") return true;
  }
  return false;
}

Expected<void> ParseHostname(const json& config, OciContainer& out) {
  SMOLBOX_ASSIGN_OR_RETURN(auto hostname, Member(config, "hostname", "", json::value_t::string));
  if (!hostname) return {};
  const std::string& name = hostname->get_ref<const std::string&>();
  bool printable = std::all_of(name.begin(), name.end(), [](char c) { return c > ' ' && c < 127; });
  if (name.size() > 64 || !printable)
    return Fail("hostname", "must be at most 64 printable characters without spaces");
  out.run.sandbox.hostname = name;
  return {};
}

}  // namespace

Expected<OciContainer> ParseOciConfig(const std::string& text, const std::string& bundle,
                                      BackendKind backend) {
  SMOLBOX_ASSIGN_OR_RETURN(json config,
                           ParseBoundedJson(text, {.max_bytes = kMaxConfigBytes}, "config.json"));
  if (!config.is_object()) return Fail("config.json", "must be a JSON object");
  SMOLBOX_TRY(OnlyKnownKeys(config, "",
                            {"ociVersion", "root", "mounts", "process", "hostname", "domainname",
                             "hooks", "annotations", "linux"}));
  SMOLBOX_ASSIGN_OR_RETURN(auto version, Member(config, "ociVersion", "", json::value_t::string));
  if (!version || !version->get_ref<const std::string&>().starts_with("1.")) {
    return Fail(
        "ociVersion",
        fmt::format("must be a 1.x version of the runtime spec (this runtime reads {} to {})",
                    kOciVersionMin, kOciVersionMax));
  }
  OciContainer out;
  // A container runs until it ends or is stopped: the longest wall time and output smolbox
  // allows, unless its annotations say less.
  out.run.exec.limits.timeout_ms = kMaxTimeoutMs;
  out.run.exec.limits.output_bytes = kMaxOutputBytes;
  out.run.sandbox.vm_snapshot = false;
  SMOLBOX_ASSIGN_OR_RETURN(auto root, Member(config, "root", "", json::value_t::object));
  if (!root) return Fail("root", "is required");
  SMOLBOX_TRY(ParseRoot(*root, bundle, out));
  SMOLBOX_ASSIGN_OR_RETURN(auto process, Member(config, "process", "", json::value_t::object));
  if (!process) return Fail("process", "is required: smolbox runs a container's process");
  SMOLBOX_TRY(ParseProcess(*process, out));
  SMOLBOX_ASSIGN_OR_RETURN(auto mounts, Member(config, "mounts", "", json::value_t::array));
  for (size_t i = 0; mounts && i < mounts->size(); ++i)
    SMOLBOX_TRY(ParseMount((*mounts)[i], i, out));
  SMOLBOX_TRY(ParseHostname(config, out));
  if (config.contains("domainname")) Replaced(out, "domainname", "the sandbox has no NIS domain");
  SMOLBOX_ASSIGN_OR_RETURN(auto hooks, Member(config, "hooks", "", json::value_t::object));
  if (hooks) {
    SMOLBOX_ASSIGN_OR_RETURN(out.hooks, ParseHooks(*hooks));
  }
  SMOLBOX_ASSIGN_OR_RETURN(auto linux, Member(config, "linux", "", json::value_t::object));
  if (linux) SMOLBOX_TRY(ParseLinux(*linux, out));
  SMOLBOX_ASSIGN_OR_RETURN(auto annotations,
                           Member(config, "annotations", "", json::value_t::object));
  SMOLBOX_TRY(ParseAnnotations(annotations ? *annotations : json::object(), backend, out));
  if (out.run.sandbox.backend == BackendKind::kVm && out.run.sandbox.cpu_shares != 0) {
    Replaced(out, "linux.resources.cpu.shares", "a microVM's vCPUs and CPU quota hold it instead");
    out.run.sandbox.cpu_shares = 0;
  }
  if (out.run.sandbox.backend == BackendKind::kVm && !out.run.sandbox.network_namespace.empty()) {
    Replaced(out, "linux.namespaces network path",
             "a microVM's guest has no network but smolbox's egress");
    out.run.sandbox.network_namespace.clear();
  }
  out.own_network_namespace = !out.hooks.empty() && out.run.sandbox.network_namespace.empty() &&
                              ListsNetworkNamespace(config);
  if ((out.own_network_namespace || !out.run.sandbox.network_namespace.empty()) &&
      out.run.sandbox.egress.policy.Enabled()) {
    return Fail(std::string("annotations.") + kEgressAnnotation,
                "cannot be combined with a network namespace the engine made");
  }
  if (auto valid = ValidateRunSpec(out.run); !valid) return std::unexpected(valid.error());
  return out;
}

Expected<OciProcess> ParseOciProcess(const std::string& text, const RunSpec& container) {
  SMOLBOX_ASSIGN_OR_RETURN(json process,
                           ParseBoundedJson(text, {.max_bytes = kMaxConfigBytes}, "process"));
  if (!process.is_object()) return Fail("process", "must be a JSON object");
  OciContainer parsed;
  parsed.run.sandbox = container.sandbox;
  parsed.run.exec.limits = container.exec.limits;
  SMOLBOX_TRY(ParseProcess(process, parsed));
  if (auto valid = ValidateRunSpec(parsed.run); !valid) return std::unexpected(valid.error());
  return OciProcess{std::move(parsed.run.exec), parsed.run.sandbox.user, parsed.terminal,
                    std::move(parsed.notes)};
}

Expected<void> CheckContainerId(const std::string& id) {
  bool allowed = std::all_of(id.begin(), id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '+' || c == '-' ||
           c == '.';
  });
  if (id.empty() || id.size() > 1024 || !allowed || id == "." || id == "..") {
    return Fail(
        "container id",
        fmt::format("must be 1 to 1024 letters, digits, '_', '+', '-' or '.' (got {:?})", id));
  }
  return {};
}

}  // namespace smolbox::oci
