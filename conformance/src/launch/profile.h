// A sandbox under test, described as a command template (conformance/profiles/*.json).
//
//   {"name": "bwrap",
//    "description": "bubblewrap, unprivileged namespaces",
//    "binary": "bwrap",                       looked up on PATH; missing means setup error
//    "version_command": ["bwrap", "--version"],
//    "command": ["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
//                "{mounts...}", "{env...}", "--chdir", "{workdir}", "--", "{argv...}"],
//    "mount": {"ro": ["--ro-bind", "{source}", "{target}"], "rw": ["--bind", "{source}", "{target}"]},
//    "env": ["--setenv", "{key}", "{value}"],
//    "limits": {"timeout_ms": ["timeout", "-s", "KILL", "{timeout_s}"]},   prefix wrappers
//    "limit_args": {"memory_mib": ["--memory", "{memory_mib}m"]},          inserted at {limits...}
//    "unsupported": ["memory_mib", "pids", "cpus", "storage_mib", "output_bytes", "files"],
//    "paths": "sandbox" | "host",             how {mount:NAME} and {workdir} resolve
//    "result": "exit_code" | "smolbox_json",
//    "syntax_only": false}                    true: cannot run here, only validated
//
// Optional fields beyond these:
//    "install": "apt install bubblewrap",     told when the binary is missing
//    "stdin": ["-i"],                         inserted at {stdin...} when the case has stdin
//    "interpreters": {"js": ["/usr/local/bin/node"]},   default /usr/bin/python3 -u,
//                                             /usr/bin/node, /bin/sh
//    "variables": {"image": "node:20-bookworm"}         more {name}s; the loader may override
//    "setup": ["{profile_dir}/docker-peer", "start", "{docker_dir}"]   run once before the
//    "teardown": ["{profile_dir}/docker-peer", "stop", "{docker_dir}"] cases and once after
//                                             them (after a failed setup too), with the
//                                             variables and {profile_dir}, the directory of
//                                             the profile's file
//    "user": {"sandbox": ["--uid", "65534"], "root": ["--uid", "0"]}   inserted at {user...}
//                                             for the case's "user"; a case whose user has no
//                                             entry is skipped (sandbox needs none)
//    "egress": {"net": ["--net"],             inserted at {egress...} for an egress case: "net"
//               "allow_host": ["--allow-host", "{host}"],   when it opens the network, one
//               "allow_cidr": ["--allow-cidr", "{cidr}"],   "allow_host" per name and one
//               "deny_cidr": ["--deny-cidr", "{cidr}"],     "allow_cidr" per range. These three
//               "net_limit": ["--net-limit", "{bytes}"],    are required, and may be empty
//               "ca_bundle": ["--ca-bundle", "{path}"]}     (null: nothing to say). Without
//                                             the field, egress cases skip. "deny_cidr" (one
//                                             per range), "net_limit" and "ca_bundle" (the
//                                             test CA's PEM file on the host, for a case that
//                                             trusts it) are optional: a case that needs one
//                                             the profile lacks skips.
//
// Placeholders: {argv...} {mounts...} {env...} {limits...} {stdin...} {user...} {egress...}
// {variant...}
// expand to several words, each only as a whole word of "command" ({variant...}: the flags the
// loader's smolbox variant adds, e.g. --no-snapshot for smolbox:vm-fresh; none otherwise);
// {workdir}, {timeout_ms}, {timeout_s}, {cpu_ms}, {memory_mib}, {cpus} (decimal, e.g. 0.5),
// {vcpus} (whole CPUs, rounded up), {pids}, {storage_mib}, {output_bytes}, {files} and the
// variables ({backend}, {smolbox}) expand in place anywhere; {source} {target} only in "mount",
// {key} {value} only in "env", {host} only in "egress.allow_host", {cidr} only in
// "egress.allow_cidr" and "egress.deny_cidr", {bytes} only in "egress.net_limit", {path} only in
// "egress.ca_bundle". A limit
// placeholder takes the case's value or the RunSpec default. Every limit must be mapped (in
// "limits", "limit_args" or by a placeholder in "command") or listed in "unsupported".
//
// A profile of "kind": "http" (launch/http_profile.h) describes a sandbox reached through its
// HTTP API instead: each case becomes the calls of "calls", made by `smolvm-check http-call`.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "battery/catalog.h"

namespace smolvm_check {

// How a profile gives a sandbox an egress policy ("egress").
struct EgressTemplates {
  std::vector<std::string> net;
  std::vector<std::string> allow_host;  // with {host}
  std::vector<std::string> allow_cidr;  // with {cidr}
  std::vector<std::string> deny_cidr;   // with {cidr}; empty: cannot be expressed
  std::vector<std::string> net_limit;   // with {bytes}; empty: cannot be expressed
  std::vector<std::string> ca_bundle;   // with {path}; empty: cannot be expressed
};

// One request of an http profile's case (launch/http_profile.h).
struct HttpCall {
  std::string method;  // GET, POST, PUT or DELETE
  std::string path;    // with scalar placeholders
  std::optional<nlohmann::json> body;  // a JSON template
  bool result = false;  // its reply is the case's result (exactly one call)
  bool always = false;  // made even after an earlier call failed (a teardown)
};

// What an http profile has instead of a command.
struct HttpTemplates {
  std::string endpoint;             // unix:PATH or http://HOST:PORT
  std::vector<std::string> server;  // the server started for the battery; empty: one is running
  std::vector<HttpCall> calls;
  nlohmann::json mount_ro, mount_rw;  // one element of {mounts}, with {source} and {target}
  std::map<std::string, std::string> result_fields;  // "exit_code" result: exit_code, stdout,
                                                     // stderr -> a JSON pointer into the reply
};

struct Profile {
  std::string name;
  std::string description;
  std::string binary;
  std::vector<std::string> version_command;
  std::vector<std::string> setup;     // run before the first case (profile_setup.h)
  std::vector<std::string> teardown;  // run after the last
  std::vector<std::string> command;
  std::vector<std::string> mount_ro;
  std::vector<std::string> mount_rw;
  std::vector<std::string> env;
  std::map<std::string, std::vector<std::string>> limit_wrappers;  // prefix before command
  std::map<std::string, std::vector<std::string>> limit_args;      // at {limits...}
  std::vector<std::string> unsupported;
  bool host_paths = false;  // "paths": "host" (the null sandbox runs everything on the host)
  bool smolbox_json = false;
  bool syntax_only = false;
  std::map<std::string, std::string> variables;  // e.g. {backend}, {smolbox}, set by the loader
  std::string install_hint;                      // "install"
  std::vector<std::string> stdin_args;           // "stdin"
  std::map<std::string, std::vector<std::string>> interpreters;  // lang -> words, defaults filled
  std::map<std::string, std::vector<std::string>> user_args;     // "user": case user -> words
  // "startup_allowance_ms": added to every case's wall-time bound, for a sandbox that boots a
  // kernel before the case's own time starts (smolbox:vm-tcg sets it). 0 by default.
  int64_t startup_allowance_ms = 0;
  // smolbox:vm-fresh and smolbox:vm-tcg-fresh: every guest boots; no boot snapshot (their
  // variant's --no-snapshot is in command).
  bool fresh_boot = false;
  // smolbox:vm-prewarm and smolbox:vm-tcg-prewarm: the bench's warm rows only, in a sandbox
  // created with --prewarm {prewarm}; a run is the same as smolbox:vm's.
  bool warm_only = false;
  std::optional<EgressTemplates> egress;  // none: the profile runs no egress case
  std::optional<HttpTemplates> http;      // "kind": "http"; command and its templates unused
};

// "null", "smolbox:ns", "smolbox:auto", "smolbox:vm", "smolbox:vm-tcg", their "-fresh" vm
// variants, a name in profiles_dir, or a path. overrides set the profile's declared variables
// (smolvm-check's --var image=app:1).
Expected<Profile> LoadProfile(const std::string& sandbox, const std::string& profiles_dir,
                              const std::map<std::string, std::string>& overrides = {});
Expected<Profile> ParseProfile(const std::string& json_text, const std::string& origin);

// One case, placed on the host: where its mounts and workdir are.
struct Placement {
  std::map<std::string, std::string> mount_sources;  // mount name -> host directory
  std::string payload_dir;                            // host directory holding the payloads
  std::string payload_source;  // a copy of it that the sandbox mounts instead; empty: none
  std::string workdir_host;                           // for host_paths profiles
  std::map<std::string, std::string> hints;           // canary hints for {name} in args
  std::string marker;                                 // appended as the last argv word
  std::string test_ca_path;  // the test internet's CA (PEM), for a case that trusts it
};

// The full command line for this case under this profile: the limit wrappers (in the order of
// the limits map, each applied when its limit is non-zero), then the command. {argv...} is the
// interpreter, the payload (under kPayloadTarget, or its host path for host_paths), the case's
// args with {mount:NAME}, {workdir} and the canary hints substituted, then the marker. The
// payload directory is mounted read-only at kPayloadTarget ahead of the case's mounts; for
// host_paths, at its own path (a profile that hides part of the host, as firejail's private
// /tmp does, shows it through its "mount" words; null and runsc have none).
Expected<std::vector<std::string>> RenderCommand(const Profile& profile, const Case& c,
                                                 const Placement& placement);
// The case's command in the sandbox: the interpreter, the payload, the args with their
// placeholders expanded, then the marker ({argv...}).
Expected<std::vector<std::string>> CaseArgv(const Profile& profile, const Case& c, const Placement& placement);
// Whether the profile can run the case's workload as the user the case asks for.
bool RunsAsCaseUser(const Profile& profile, const Case& c);
// Why the profile cannot give the case its egress policy; nullopt when it can, or the case has
// none.
std::optional<std::string> CannotExpressEgress(const Profile& profile, const Case& c);
// The limits the case sets that the profile cannot enforce.
std::vector<std::string> UnsupportedLimits(const Profile& profile, const Case& c);

}  // namespace smolvm_check
