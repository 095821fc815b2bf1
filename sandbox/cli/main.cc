// smolbox: the command-line front end.
//
//   smolbox run --mem 256M --timeout 5s -- python3 -c 'print(1)'
//   smolbox run --spec job.json --json
//   smolbox create box --mem 256M && smolbox exec box -- python3 -c 'print(1)' && smolbox rm box
//
// Flags become a RunSpec, which is validated and run on a backend; the RunResult
// is passed through (or printed as JSON) and becomes the exit code.
#include <fcntl.h>
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "client.h"
#include "guest_dir.h"
#include "keeper.h"
#include "mutant.h"
#include "sandbox_state.h"
#include "trust_store.h"
#include "image_command.h"
#include "oci_command.h"
#include "serve_command.h"
#include "smolbox/backend.h"
#include "smolbox/image_spec.h"
#include "smolbox/result.h"
#include "smolbox/spec.h"
#include "smolbox/units.h"

namespace {

using smolbox::Error;
using smolbox::Expected;

// As docker: an error of smolbox itself rather than of the workload.
constexpr int kExitSmolboxError = 125;
// Bounds what a --spec file can make us read (and what --spec /dev/zero costs).
using smolbox::kMaxSpecBytes;

// A flag's raw text and whether it was given. Values are parsed by our own
// functions, not CLI11's, so that every bad value gets the same one-line error.
struct Flag {
  std::string value;
  CLI::Option* option = nullptr;
  explicit operator bool() const { return option != nullptr && option->count() > 0; }
};

struct RunFlags {
  Flag backend, accel, image, timeout, cpu_time, mem, cpus, pids, storage, output_limit, files;
  Flag workdir, user, stdin_file, spec_file, volume_root, entrypoint;
  std::vector<std::string> env, volumes, command, ca_bundles;
  bool json = false;
  bool interactive = false;
  bool no_snapshot = false;
  std::string prewarm;  // create only
  // Egress
  bool net = false;
  std::vector<std::string> allow_hosts, allow_cidrs, deny_cidrs;
  Flag dns_server, egress_netns, net_limit, net_connections;
};

// smolbox create / exec / ls / rm: persistent sandboxes.
struct SandboxFlags {
  std::string name;
  std::vector<std::string> names;  // rm
  Flag timeout, workdir, stdin_file;
  std::vector<std::string> env, command;
  bool json = false;
  bool interactive = false;
  bool force = false;
  int lifeline_fd = -1;  // create, from smolbox serve
};

std::unexpected<Error> Fail(std::string field, std::string reason) {
  return std::unexpected(Error::Field(std::move(field), std::move(reason)));
}

// ---------------------------------------------------------------------------
// Help text: the defaults and bounds come from the same constants the validator uses.

std::string FormatMs(int64_t ms) {
  if (ms % 3'600'000 == 0) return fmt::format("{}h", ms / 3'600'000);
  if (ms % 60'000 == 0) return fmt::format("{}m", ms / 60'000);
  if (ms % 1000 == 0) return fmt::format("{}s", ms / 1000);
  return fmt::format("{}ms", ms);
}

std::string FormatBytes(int64_t bytes) {
  for (auto [shift, suffix] : {std::pair{40, "T"}, {30, "G"}, {20, "M"}, {10, "K"}}) {
    if (bytes % (int64_t{1} << shift) == 0) return fmt::format("{}{}", bytes >> shift, suffix);
  }
  return fmt::format("{}B", bytes);
}

std::string FormatMiB(int64_t mib) { return FormatBytes(mib << 20); }

Flag& AddFlag(CLI::App& app, const std::string& name, Flag& flag, const std::string& help,
              const std::string& type) {
  flag.option = app.add_option(name, flag.value, help)->type_name(type);
  return flag;
}

void AddSpecOptions(CLI::App& run, RunFlags& f) {
  AddFlag(run, "--backend", f.backend,
          "where to run: auto (vm on usable KVM, else ns), ns or vm (default auto)", "KIND");
  AddFlag(run, "--accel", f.accel,
          "the vm backend's accelerator: auto (KVM when usable), kvm, or tcg (QEMU's emulation: "
          "slow, but real; only when asked for) (default auto)",
          "auto|kvm|tcg");
  AddFlag(run, "--image", f.image,
          "root filesystem: host (the host's /usr, /lib* and /bin, read-only); a rootfs "
          "directory, told by its leading / or . (./rootfs); or else an image that smolbox image "
          "import brought into the store, by NAME[:TAG] or ID. Never pulled (default host)",
          "host|DIR|NAME[:TAG]");
  run.add_option("-e,--env", f.env, "set a variable; repeatable; no host variable leaks in")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  AddFlag(run, "-w,--workdir", f.workdir,
          fmt::format("working directory in the sandbox (default {})", smolbox::SandboxSpec{}.workdir),
          "DIR");
  run.add_option("-v,--volume", f.volumes,
                 "bind a host path into the sandbox, rw unless :ro; repeatable; a relative HOST "
                 "is taken from the current directory")
      ->type_name("HOST:GUEST[:ro|rw]")
      ->allow_extra_args(false);
  AddFlag(run, "--volume-root", f.volume_root,
          "every volume's HOST (of -v and of the spec) is then a path relative to DIR, opened "
          "beneath it without following any symlink: for volumes named by someone else, as "
          "smolbox serve's clients do",
          "DIR");
  run.add_option("--ca-bundle", f.ca_bundles,
                 "add the PEM certificates of FILE to the sandbox's CA trust store (a TLS-inspecting "
                 "proxy's CA, say); every common client takes them without flags; repeatable")
      ->type_name("FILE")
      ->allow_extra_args(false);
  AddFlag(run, "--user", f.user,
          "sandbox (1000, no capabilities), root (root only inside the sandbox) or any ids "
          "up to 65535, the GID defaulting to the UID (default sandbox, or the image's User)",
          "sandbox|root|UID[:GID]");
  AddFlag(run, "--stdin", f.stdin_file, "stream this host file (any size) to the command's stdin", "FILE");
  run.add_flag("--no-snapshot", f.no_snapshot,
               "vm: boot the guest from scratch rather than restore it from the boot snapshot");
  AddFlag(run, "--spec", f.spec_file,
          "start from this RunSpec JSON; flags override its fields, -e and -v add to them", "FILE");
}

void AddTimeLimitOptions(CLI::App& run, RunFlags& f) {
  const smolbox::Limits d;
  AddFlag(run, "--timeout", f.timeout,
          fmt::format("wall-clock limit, e.g. 250ms, 2s, 1.5m; a bare number is ms "
                      "(default {}, max {})",
                      FormatMs(d.timeout_ms), FormatMs(smolbox::kMaxTimeoutMs)),
          "DUR");
  AddFlag(run, "--cpu-time", f.cpu_time,
          fmt::format("CPU-time limit (default none: only --timeout bounds it; max {})",
                      FormatMs(smolbox::kMaxTimeoutMs)),
          "DUR");
  AddFlag(run, "--cpus", f.cpus,
          fmt::format("CPUs to allow, may be fractional (default {}, max {})", d.cpus,
                      smolbox::kMaxCpus),
          "N");
}

void AddSizeLimitOptions(CLI::App& run, RunFlags& f) {
  const smolbox::Limits d;
  AddFlag(run, "--mem", f.mem,
          fmt::format("memory limit, e.g. 256M, 2G; a bare number is MiB (default {}, {} to {})",
                      FormatMiB(d.memory_mib), FormatMiB(smolbox::kMinMemoryMiB),
                      FormatMiB(smolbox::kMaxMemoryMiB)),
          "SIZE");
  AddFlag(run, "--pids", f.pids,
          fmt::format("processes and threads (default {}, max {})", d.pids, smolbox::kMaxPids),
          "N");
  AddFlag(run, "--storage", f.storage,
          fmt::format("all the space the sandbox can write (default {}, max {})",
                      FormatMiB(d.storage_mib), FormatMiB(smolbox::kMaxStorageMiB)),
          "SIZE");
  AddFlag(run, "--output-limit", f.output_limit,
          fmt::format("bytes kept of stdout and of stderr, each, e.g. 64K; a bare number is MiB "
                      "(default {}, max {})",
                      FormatBytes(d.output_bytes), FormatBytes(smolbox::kMaxOutputBytes)),
          "SIZE");
  AddFlag(run, "--files", f.files,
          fmt::format("open files per process (default {}, {} to {})", d.files, smolbox::kMinFiles,
                      smolbox::kMaxFiles),
          "N");
}

void AddEgressOptions(CLI::App& run, RunFlags& f) {
  const std::string group = "Egress (default: no network, loopback only)";
  run.add_flag("--net", f.net, "open egress to the public internet; the floor (host, link-local, "
                               "metadata) still holds, and private ranges need --allow-cidr")
      ->group(group);
  run.add_option("--allow-host", f.allow_hosts,
                 "only these names resolve, and only their addresses can be reached, on PORT (any if "
                 "none); *.NAME covers its subdomains; repeatable; implies egress")
      ->type_name("NAME[:PORT]")
      ->allow_extra_args(false)
      ->group(group);
  run.add_option("--allow-cidr", f.allow_cidrs,
                 "also reach this range, on PORT (any if none); the one way to a private range; "
                 "repeatable; implies egress")
      ->type_name("CIDR[:PORT]")
      ->allow_extra_args(false)
      ->group(group);
  run.add_option("--deny-cidr", f.deny_cidrs, "never reach this range, whatever allows it; repeatable")
      ->type_name("CIDR")
      ->allow_extra_args(false)
      ->group(group);
  AddFlag(run, "--dns-server", f.dns_server,
          "the resolver the gateway asks (default: the first nameserver of /etc/resolv.conf)", "IP[:PORT]")
      .option->group(group);
  AddFlag(run, "--egress-netns", f.egress_netns,
          "the network namespace the gateway dials from (default: smolbox's own)", "PATH")
      .option->group(group);
  AddFlag(run, "--net-limit", f.net_limit, "bytes the sandbox may send in all (default: no limit)", "SIZE")
      .option->group(group);
  AddFlag(run, "--net-connections", f.net_connections,
          fmt::format("connections open at once (default {}, max {})", smolbox::EgressSpec{}.max_connections,
                      smolbox::kMaxEgressConnections),
          "N")
      .option->group(group);
}

void AddRunCommand(CLI::App& app, RunFlags& f) {
  CLI::App* run = app.add_subcommand("run", "run a command in a sandbox");
  // Everything from the command on is the command's own: `smolbox run ls -v` must not
  // read -v as --volume.
  run->positionals_at_end();
  AddSpecOptions(*run, f);
  AddFlag(*run, "--entrypoint", f.entrypoint,
          "run PROGRAM in place of the image's Entrypoint, with the command after -- as its "
          "arguments and the image's Cmd not used, as docker does; \"\" for none",
          "PROGRAM");
  AddTimeLimitOptions(*run, f);
  AddSizeLimitOptions(*run, f);
  AddEgressOptions(*run, f);
  run->add_flag("-i,--interactive", f.interactive, "stream smolbox's own stdin to the command's stdin");
  run->add_flag("--json", f.json,
                "print the RunResult as JSON, with the output in it, instead of streaming the output through");
  run->add_option("command", f.command, "the command and its arguments, best after --")
      ->type_name("ARGS");
  run->footer(
      "Example: smolbox run --mem 256M --timeout 5s -- python3 -c 'print(1)'\n"
      "Exit status: the command's own; 124 on timeout; 128+N when killed by signal N or for a\n"
      "limit; 125 when smolbox refuses the input or fails to set up.");
}

void AddCreateCommand(CLI::App& app, RunFlags& f, SandboxFlags& s) {
  CLI::App* create = app.add_subcommand("create", "start a persistent sandbox that serves many execs");
  create->add_option("name", s.name, "its name: letters, digits, '_', '.', '-'")->required()->type_name("NAME");
  AddSpecOptions(*create, f);
  AddTimeLimitOptions(*create, f);
  AddSizeLimitOptions(*create, f);
  AddEgressOptions(*create, f);
  create->add_option("--prewarm", f.prewarm,
                     "vm backend: keep a started interpreter that forks each `python3 SCRIPT` or `python3 -c` "
                     "exec, which then skips Python's start (docs/performance.md, \"Prewarm\")")
      ->type_name("python");
  create->add_flag("--json", s.json, "print the setup's result as JSON");
  // Taken only to refuse it clearly: a sandbox's commands come with each exec.
  create->add_option("command", f.command)->group("");
  // smolbox serve's: the sandbox lives only as long as the other end of this descriptor.
  create->add_option("--lifeline-fd", s.lifeline_fd)->group("");
  create->footer(
      "The sandbox lives until smolbox rm, beyond this command: its agent (ns) or VM (vm) keeps\n"
      "running, held by a keeper process. --timeout, -e and -w are defaults for each exec;\n"
      "memory, CPUs, pids and storage hold for the whole sandbox, across execs.");
}

void AddExecCommand(CLI::App& app, SandboxFlags& s) {
  // Options go before the "--"; everything after it is the command's own.
  CLI::App* exec = app.add_subcommand("exec", "run a command in a persistent sandbox");
  exec->add_option("name", s.name, "the sandbox")->required()->type_name("NAME");
  AddFlag(*exec, "--timeout", s.timeout, "this exec's wall-clock limit (default: the sandbox's)", "DUR");
  exec->add_option("-e,--env", s.env, "set a variable for this exec; repeatable")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  AddFlag(*exec, "-w,--workdir", s.workdir, "working directory (default: the sandbox's)", "DIR");
  AddFlag(*exec, "--stdin", s.stdin_file, "stream this host file (any size) to the command's stdin", "FILE");
  exec->add_flag("-i,--interactive", s.interactive, "stream smolbox's own stdin to the command's stdin");
  exec->add_flag("--json", s.json,
                 "print the RunResult as JSON, with the output in it, instead of streaming the output through");
  exec->add_option("command", s.command, "the command and its arguments, best after --")
      ->type_name("ARGS");
  exec->footer(
      "Execs into one sandbox run one at a time: a second while one runs is refused as busy.\n"
      "rw volumes are copied back after each exec. Exit status as for smolbox run.");
}

void AddLsCommand(CLI::App& app, SandboxFlags& s) {
  CLI::App* ls = app.add_subcommand("ls", "list persistent sandboxes: running, busy, starting or dead");
  ls->add_flag("--json", s.json, "print them as JSON");
}

void AddRmCommand(CLI::App& app, SandboxFlags& s) {
  CLI::App* rm = app.add_subcommand("rm", "stop and remove persistent sandboxes, leaving nothing behind");
  rm->add_option("names", s.names, "the sandboxes")->required()->type_name("NAME...");
  rm->add_flag("-f,--force", s.force, "also end a sandbox in the middle of an exec");
}

// ---------------------------------------------------------------------------
// Flags -> RunSpec

Expected<int64_t> ParseInteger(const std::string& text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty()) {
    return Fail("", fmt::format("must be an integer (got {:?})", text));
  }
  return value;
}

Expected<double> ParseNumber(const std::string& text) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty()) {
    return Fail("", fmt::format("must be a number (got {:?})", text));
  }
  return value;
}

// Parses a given flag into `out`, naming the flag in the error.
template <typename T, typename Parser, typename Out>
Expected<void> SetFrom(const Flag& flag, const char* name, Parser parse, Out& out) {
  if (!flag) return {};
  Expected<T> value = parse(flag.value);
  if (!value) return Fail(name, value.error().what);
  out = *value;
  return {};
}

Expected<void> ApplyLimitFlags(const RunFlags& f, smolbox::RunSpec& spec) {
  auto duration = [](const std::string& s) { return smolbox::ParseDuration(s); };
  auto mib = [](const std::string& s) { return smolbox::ParseSizeMiB(s); };
  auto bytes = [](const std::string& s) { return smolbox::ParseBytes(s); };
  smolbox::SandboxLimits& held = spec.sandbox.limits;
  smolbox::ExecLimits& own = spec.exec.limits;
  for (auto ok : {
           SetFrom<int64_t>(f.timeout, "--timeout", duration, own.timeout_ms),
           SetFrom<int64_t>(f.cpu_time, "--cpu-time", duration, own.cpu_ms),
           SetFrom<int64_t>(f.mem, "--mem", mib, held.memory_mib),
           SetFrom<double>(f.cpus, "--cpus", ParseNumber, held.cpus),
           SetFrom<int64_t>(f.pids, "--pids", ParseInteger, held.pids),
           SetFrom<int64_t>(f.storage, "--storage", mib, held.storage_mib),
           SetFrom<int64_t>(f.output_limit, "--output-limit", bytes, own.output_bytes),
           SetFrom<int64_t>(f.files, "--files", ParseInteger, own.files),
       }) {
    if (!ok) return ok;
  }
  return {};
}

// Drops "." components but keeps "..": through a symlink, "a/.." is not lexically ".".
Expected<std::string> Absolute(const std::string& path, const char* flag) {
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(path, ec);
  if (ec) return std::unexpected(Error{flag, fmt::format("cannot resolve {}", path), ec.value()});
  std::filesystem::path out;
  for (const auto& part : abs) {
    if (part != ".") out /= part;
  }
  return out.string();
}

Expected<void> AddVolumes(const std::vector<std::string>& volumes, smolbox::SandboxSpec& spec) {
  for (const std::string& text : volumes) {
    SMOLBOX_ASSIGN_OR_RETURN(auto mount, smolbox::ParseVolume(text));
    // Beneath a volume root the source stays relative to it; the validator says if it is not.
    if (spec.volume_root.empty()) {
      auto source = Absolute(mount.source, "--volume");
      SMOLBOX_TRY(source);
      mount.source = *source;
    }
    spec.mounts.push_back(std::move(mount));
  }
  return {};
}

// --env KEY=VALUE entries, for run's spec and exec's order alike.
Expected<void> AddEnv(const std::vector<std::string>& entries, std::map<std::string, std::string>& env) {
  for (const std::string& entry : entries) {
    size_t eq = entry.find('=');
    // KEY alone would mean "copy from the host" in docker; the host's environment never leaks in.
    if (eq == std::string::npos) {
      return Fail("--env", fmt::format("expected KEY=VALUE (got {:?})", entry));
    }
    env.insert_or_assign(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return {};
}

Expected<void> ApplyNamedFlags(const RunFlags& f, smolbox::RunSpec& spec) {
  if (f.backend) {
    SMOLBOX_ASSIGN_OR_RETURN(auto kind, smolbox::ParseBackendKind(f.backend.value));
    spec.sandbox.backend = kind;
  }
  if (f.accel) {
    auto accel = smolbox::ParseAccel(f.accel.value);
    SMOLBOX_TRY(accel);
    spec.sandbox.accel = *accel;
  }
  if (f.user) {
    SMOLBOX_ASSIGN_OR_RETURN(spec.sandbox.user, smolbox::ParseWorkloadUser(f.user.value));
  }
  if (f.workdir) spec.sandbox.workdir = f.workdir.value;
  if (f.stdin_file) {
    spec.exec.stdin_file = f.stdin_file.value;
    spec.exec.stdin_data.reset();  // the flag overrides the spec's stdin, whichever form it took
  }
  return {};
}

// Each flag's rules add to the spec's.
template <typename Rule, typename Parse>
Expected<void> AddRules(const std::vector<std::string>& texts, const char* flag, Parse parse,
                        std::vector<Rule>& out) {
  for (const std::string& text : texts) {
    SMOLBOX_ASSIGN_OR_RETURN(Rule rule, parse(text, flag));
    out.push_back(std::move(rule));
  }
  return {};
}

Expected<void> ApplyEgressFlags(const RunFlags& f, smolbox::EgressSpec& egress) {
  smolbox::EgressPolicy& policy = egress.policy;
  if (f.net) policy.open = true;
  SMOLBOX_TRY(AddRules(f.allow_hosts, "--allow-host", smolbox::ParseHostRule, policy.allow_hosts));
  SMOLBOX_TRY(AddRules(f.allow_cidrs, "--allow-cidr", smolbox::ParseCidrRule, policy.allow_cidrs));
  SMOLBOX_TRY(AddRules(f.deny_cidrs, "--deny-cidr", smolbox::ParseCidr, policy.deny_cidrs));
  if (f.dns_server) {
    SMOLBOX_ASSIGN_OR_RETURN(egress.dns_server, smolbox::ParseSocketAddress(f.dns_server.value, 53, "--dns-server"));
  }
  if (f.egress_netns) {
    SMOLBOX_ASSIGN_OR_RETURN(egress.netns, Absolute(f.egress_netns.value, "--egress-netns"));
  }
  auto bytes = [](const std::string& s) { return smolbox::ParseBytes(s); };
  SMOLBOX_TRY(SetFrom<int64_t>(f.net_limit, "--net-limit", bytes, egress.limit_bytes));
  if (egress.limit_bytes && *egress.limit_bytes < 1) return Fail("--net-limit", "must be at least 1 byte");
  SMOLBOX_TRY(SetFrom<int64_t>(f.net_connections, "--net-connections", ParseInteger, egress.max_connections));
  if (egress.max_connections < 1 || egress.max_connections > smolbox::kMaxEgressConnections) {
    return Fail("--net-connections", fmt::format("must be 1 to {}", smolbox::kMaxEgressConnections));
  }
  return {};
}

// A path (it starts with / or .) is made absolute; anything else but "host" is a store
// reference, resolved once the whole spec is known (ApplyStoreImage).
Expected<void> ApplyImage(const Flag& image, smolbox::SandboxSpec& spec) {
  if (!image) return {};
  spec.image = image.value;
  if (!image.value.starts_with('.')) return {};
  SMOLBOX_ASSIGN_OR_RETURN(auto abs, Absolute(image.value, "--image"));
  spec.image = abs;
  return {};
}

// A file the caller names for flag, read whole within max_bytes.
Expected<std::string> ReadTextFile(const std::string& path, size_t max_bytes, const std::string& flag) {
  std::FILE* file = std::fopen(path.c_str(), "rbe");
  if (file == nullptr) return std::unexpected(Error{flag, "cannot open " + path, errno});
  std::string text;
  char buffer[1 << 16];
  size_t n = 0;
  while (text.size() <= max_bytes && (n = std::fread(buffer, 1, sizeof buffer, file)) > 0) {
    text.append(buffer, n);
  }
  int err = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (err != 0) return std::unexpected(Error{flag, "cannot read " + path, err});
  if (text.size() > max_bytes) {
    return Fail(flag, fmt::format("{} is larger than {}", path, FormatBytes(static_cast<int64_t>(max_bytes))));
  }
  return text;
}

// Each --ca-bundle FILE's certificates after the spec's own.
Expected<void> AddCaBundles(const std::vector<std::string>& files, smolbox::SandboxSpec& spec) {
  for (const std::string& path : files) {
    SMOLBOX_ASSIGN_OR_RETURN(auto text, ReadTextFile(path, smolbox::kMaxCaBundleBytes, "--ca-bundle"));
    if (auto ok = smolbox::CheckCaBundle(text); !ok) return Fail("--ca-bundle", fmt::format("{}: {}", path, ok.error().what));
    spec.ca_bundle = smolbox::JoinCaBundles(spec.ca_bundle, text);
  }
  return {};
}

// The spec the flags (and --spec) describe, its image resolved; for_run is false for create,
// which refuses what only a run has.
Expected<smolbox::RunSpec> BuildSpec(const RunFlags& f, bool for_run = true) {
  smolbox::RunSpec spec;
  if (f.spec_file) {
    SMOLBOX_ASSIGN_OR_RETURN(auto text, ReadTextFile(f.spec_file.value, kMaxSpecBytes, "--spec"));
    SMOLBOX_ASSIGN_OR_RETURN(auto parsed, smolbox::ParseRunSpec(text, fmt::format("spec file {}", f.spec_file.value)));
    spec = std::move(parsed);
    if (!for_run && spec.exec.entrypoint) {
      return Fail("entrypoint", "is a run's; a sandbox's execs each bring their own command");
    }
  }
  if (f.volume_root) {
    SMOLBOX_ASSIGN_OR_RETURN(spec.sandbox.volume_root, Absolute(f.volume_root.value, "--volume-root"));
  }
  for (auto ok :
       {ApplyNamedFlags(f, spec), ApplyImage(f.image, spec.sandbox), ApplyLimitFlags(f, spec),
        AddEnv(f.env, spec.exec.env), AddVolumes(f.volumes, spec.sandbox),
        ApplyEgressFlags(f, spec.sandbox.egress), AddCaBundles(f.ca_bundles, spec.sandbox)}) {
    SMOLBOX_TRY(ok);
  }
  if (!f.command.empty()) spec.exec.argv = f.command;
  if (f.entrypoint) {
    spec.exec.entrypoint = f.entrypoint.value.empty() ? std::vector<std::string>{} : std::vector<std::string>{f.entrypoint.value};
  }
  if (f.no_snapshot) spec.sandbox.vm_snapshot = false;
  // The image's User and WorkingDir, unless the flags or the spec file named their own.
  smolbox::image::CallerChoices given;
  given.user = static_cast<bool>(f.user);
  given.workdir = static_cast<bool>(f.workdir);
  SMOLBOX_TRY(smolbox::image::ResolveSpecImage(spec, given));
  return spec;
}

// ---------------------------------------------------------------------------
// Output

void WriteAll(std::FILE* stream, const std::string& data) {
  std::fwrite(data.data(), 1, data.size(), stream);
  std::fflush(stream);
}

void PrintJson(const smolbox::RunResult& result) {
  fmt::print("{}\n", smolbox::ToJson(result).dump(2));
  std::fflush(stdout);
}

int Report(const smolbox::RunResult& result, bool json) {
  if (json) {
    PrintJson(result);
    return smolbox::CliExitCode(result);
  }
  WriteAll(stdout, result.stdout_data);
  WriteAll(stderr, result.stderr_data);
  for (const std::string& warning : result.warnings) {
    fmt::print(stderr, "smolbox: warning: {}\n", warning);
  }
  if (result.status == smolbox::Status::kSetupError ||
      result.status == smolbox::Status::kInternalError) {
    fmt::print(stderr, "smolbox: {}\n",
               result.error.empty() ? smolbox::ToString(result.status) : result.error);
  }
  return smolbox::CliExitCode(result);
}

// Bad input never reaches a backend. With --json it is still a result, so that a
// caller parsing stdout always finds one.
int RefuseInput(const Error& error, bool json) {
  fmt::print(stderr, "smolbox: {}\n", error.ToString());
  if (json) {
    smolbox::RunResult result;
    result.status = smolbox::Status::kSetupError;
    result.error = error.ToString();
    PrintJson(result);
  }
  return kExitSmolboxError;
}

// Without --json, output streams to our own stdout and stderr as the workload writes it; with
// -i, our own stdin streams in.
smolbox::ExecIo CallerIo(bool interactive, bool json) {
  smolbox::ExecIo io;
  if (interactive) io.stdin_fd = 0;
  if (!json) {
    io.stdout_fd = 1;
    io.stderr_fd = 2;
  }
  return io;
}

int Run(const RunFlags& flags) {
  if (flags.interactive && flags.stdin_file) {
    return RefuseInput(Error::Field("--interactive", "cannot be combined with --stdin"), flags.json);
  }
  auto spec = BuildSpec(flags);
  if (!spec) return RefuseInput(spec.error(), flags.json);
  if (auto ok = smolbox::ValidateRunSpec(*spec); !ok) return RefuseInput(ok.error(), flags.json);
  auto backend = smolbox::MakeBackend(spec->sandbox.backend);
  if (!backend) return RefuseInput(backend.error(), flags.json);
  return Report((*backend)->Run(*spec, CallerIo(flags.interactive, flags.json)), flags.json);
}

int Create(const RunFlags& flags, const SandboxFlags& s) {
  if (flags.stdin_file) return RefuseInput(Error::Field("--stdin", "is per exec; give it to smolbox exec"), s.json);
  if (!flags.command.empty()) {
    return RefuseInput(Error::Field("command", "create takes none; smolbox exec runs one"), s.json);
  }
  auto spec = BuildSpec(flags, /*for_run=*/false);
  if (!spec) return RefuseInput(spec.error(), s.json);
  // What the flags say of an exec is each exec's default; the command comes with each exec,
  // which checks it. A --spec file's command is a run's, not the sandbox's.
  smolbox::ExecSpec& defaults = spec->exec;
  defaults.argv.clear();
  if (!flags.prewarm.empty()) spec->sandbox.prewarm = flags.prewarm;  // over a --spec file's
  if (auto ok = smolbox::ValidateExecDefaults(defaults); !ok) return RefuseInput(ok.error(), s.json);
  if (auto ok = smolbox::ValidateSandboxSpec(spec->sandbox); !ok) return RefuseInput(ok.error(), s.json);
  // Close-on-exec: the keeper, forked, keeps it; the agent and QEMU it starts must not.
  if (s.lifeline_fd >= 0 && (s.lifeline_fd <= 2 || fcntl(s.lifeline_fd, F_SETFD, FD_CLOEXEC) != 0)) {
    return RefuseInput(Error::Field("--lifeline-fd", "is not an open descriptor above 2"), s.json);
  }
  smolbox::RunResult result = smolbox::persist::CreateSandbox(s.name, spec->sandbox, defaults, s.lifeline_fd);
  bool created = result.status == smolbox::Status::kExited;
  if (s.json) {
    nlohmann::json j = smolbox::SetupToJson(result);
    j["name"] = s.name;
    if (created) j["status"] = "created";
    fmt::print("{}\n", j.dump(2));
  } else {
    for (const std::string& warning : result.warnings) fmt::print(stderr, "smolbox: warning: {}\n", warning);
    if (created) fmt::print("{}\n", s.name);
    else fmt::print(stderr, "smolbox: {}\n", result.error);
  }
  return created ? 0 : kExitSmolboxError;
}

Expected<smolbox::persist::ExecOrder> BuildExecOrder(const SandboxFlags& s) {
  smolbox::persist::ExecOrder order;
  if (s.command.empty()) return Fail("command", "is missing: smolbox exec NAME -- CMD...");
  order.argv = s.command;
  SMOLBOX_TRY(AddEnv(s.env, order.env));
  if (s.workdir) order.workdir = s.workdir.value;
  if (s.timeout) {
    auto ms = smolbox::ParseDuration(s.timeout.value);
    if (!ms) return Fail("--timeout", ms.error().what);
    order.timeout_ms = *ms;
  }
  if (s.interactive && s.stdin_file) return Fail("--interactive", "cannot be combined with --stdin");
  order.sends_stdin = s.interactive || s.stdin_file;
  order.streams_output = !s.json;
  return order;
}

int Exec(const SandboxFlags& s) {
  auto order = BuildExecOrder(s);
  if (!order) return RefuseInput(order.error(), s.json);
  smolbox::ExecIo io = CallerIo(s.interactive, s.json);
  smolbox::UniqueFd stdin_file;
  if (s.stdin_file) {
    auto opened = smolbox::persist::OpenStdinFile(s.stdin_file.value);
    if (!opened) return RefuseInput(opened.error(), s.json);
    stdin_file = std::move(*opened);
    io.stdin_fd = stdin_file.get();
  }
  return Report(smolbox::persist::ExecInSandbox(s.name, *order, io), s.json);
}

int List(const SandboxFlags& s) {
  auto listing = smolbox::persist::ListSandboxes();
  if (!listing) {
    fmt::print(stderr, "smolbox: {}\n", listing.error().ToString());
    return kExitSmolboxError;
  }
  if (s.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& box : *listing) {
      nlohmann::json j = {{"name", box.name}, {"status", smolbox::persist::ToString(box.status)}};
      if (box.info) {
        j["backend"] = box.info->backend;
        j["isolation"] = box.info->isolation;
        j["created"] = box.info->created;
      }
      if (!box.reason.empty()) j["reason"] = smolbox::ToValidUtf8(box.reason);
      out.push_back(std::move(j));
    }
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  fmt::print("{:<24} {:<9} {:<8} {:<21} {}\n", "NAME", "STATUS", "BACKEND", "CREATED", "REASON");
  for (const auto& box : *listing) {
    std::string reason = box.reason;
    std::replace(reason.begin(), reason.end(), '\n', ' ');
    fmt::print("{:<24} {:<9} {:<8} {:<21} {}\n", box.name, smolbox::persist::ToString(box.status),
               box.info ? box.info->backend : "-", box.info ? box.info->created : "-", reason);
  }
  return 0;
}

int Remove(const SandboxFlags& s) {
  int status = 0;
  for (const std::string& name : s.names) {
    if (auto ok = smolbox::persist::RemoveSandbox(name, s.force); !ok) {
      fmt::print(stderr, "smolbox: {}\n", ok.error().ToString());
      status = kExitSmolboxError;
    }
  }
  return status;
}

// The binary the server's children run: this one, as the kernel knows it.
std::string SelfPath() {
  std::error_code ec;
  auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("/proc/self/exe") : path.string();
}

// CLI11's own usage errors exit 125 like ours, in one line; --help and --version exit 0.
int ReportParseError(const CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
  std::string message = e.what();
  std::replace(message.begin(), message.end(), '\n', ' ');
  fmt::print(stderr, "smolbox: {}\n", message);
  return kExitSmolboxError;
}

// Engines are given a runtime binary, not a command: called as smolbox-oci, this is
// `smolbox oci`.
std::vector<std::string> OciAlias(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (argc > 0 && std::filesystem::path(argv[0]).filename() == "smolbox-oci") args.insert(args.begin(), "oci");
  // CLI11 takes its arguments last first.
  std::reverse(args.begin(), args.end());
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"smolbox: run untrusted code in a sandbox", "smolbox"};
#ifdef SMOLBOX_MUTANTS
  app.set_version_flag("--version", std::string("smolbox " SMOLBOX_VERSION "\n") + smolbox::mutant::Describe());
#else
  app.set_version_flag("--version", "smolbox " SMOLBOX_VERSION);
#endif
  // scripts/build-guest asks, so that the rule for where the guest lives is written once.
  app.add_flag_callback(
      "--print-guest-dir",
      [] {
        fmt::print("{}\n", smolbox::GuestDir());
        throw CLI::Success();
      },
      "print the directory the vm backend loads its guest kernel, initramfs and rootfs from, and exit");
  app.require_subcommand(1);
  // Each subcommand binds its own flags: a Flag remembers the one option it was added as.
  RunFlags flags;
  RunFlags create_flags;
  SandboxFlags sandbox;
  AddRunCommand(app, flags);
  AddCreateCommand(app, create_flags, sandbox);
  AddExecCommand(app, sandbox);
  AddLsCommand(app, sandbox);
  AddRmCommand(app, sandbox);
  smolbox::cli::ImageFlags image_flags;
  CLI::App* image = smolbox::cli::AddImageCommand(app, image_flags);
  smolbox::cli::ServeFlags serve_flags;
  CLI::App* serve = smolbox::cli::AddServeCommand(app, serve_flags);
  smolbox::cli::McpFlags mcp_flags;
  CLI::App* mcp = smolbox::cli::AddMcpCommand(app, mcp_flags);
  smolbox::cli::OciFlags oci_flags;
  CLI::App* oci = smolbox::cli::AddOciCommand(app, oci_flags);
  try {
    app.parse(OciAlias(argc, argv));
  } catch (const CLI::ParseError& e) {
    return ReportParseError(app, e);
  }
#ifdef SMOLBOX_MUTANTS
  if (auto loaded = smolbox::mutant::LoadFromEnvironment(); !loaded) {
    fmt::print(stderr, "smolbox: {}\n", loaded.error().ToString());
    return kExitSmolboxError;
  }
  std::string off;
  for (const std::string& name : smolbox::mutant::DisabledNames()) off += (off.empty() ? "" : ", ") + name;
  fmt::print(stderr, "smolbox: warning: mutant build, never for use; protections off: {}\n", off.empty() ? "none" : off);
#endif
  // Backends report failures in the RunResult; this is the last resort at the edge.
  try {
    if (app.got_subcommand("create")) return Create(create_flags, sandbox);
    if (app.got_subcommand("exec")) return Exec(sandbox);
    if (app.got_subcommand("ls")) return List(sandbox);
    if (app.got_subcommand("rm")) return Remove(sandbox);
    if (app.got_subcommand(image)) return smolbox::cli::RunImageCommand(*image, image_flags);
    if (app.got_subcommand(serve)) return smolbox::cli::RunServeCommand(serve_flags, SelfPath());
    if (app.got_subcommand(mcp)) return smolbox::cli::RunMcpCommand(mcp_flags, SelfPath());
    if (app.got_subcommand(oci)) return smolbox::cli::RunOciCommand(*oci, oci_flags);
    return Run(flags);
  } catch (const std::exception& e) {
    fmt::print(stderr, "smolbox: internal error: {}\n", e.what());
    return kExitSmolboxError;
  }
}
