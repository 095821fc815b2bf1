// Profiles of "kind": "http": a sandbox reached through its HTTP API. Each case becomes the
// profile's calls, JSON requests rendered from templates, which `smolvm-check http-call`
// (launch/http_call.h) makes inside the case's safety net; the reply of the call marked
// "result" is the case's result.
//
//   {"name": "smolbox-api", "kind": "http",
//    "binary": "{smolbox}", "version_command": ["{smolbox}", "--version"],
//    "server": ["{smolbox}", "serve", "--listen", "unix:{api_socket}", "--volume-root", "{volume_root}"],
//    "endpoint": "unix:{api_socket}",
//    "calls": [{"method": "POST", "path": "/v1/run", "result": true,
//               "body": {"argv": "{argv}", "env": "{env}", "stdin": "{stdin}", "mounts": "{mounts}",
//                        "limits": {"timeout_ms": "{timeout_ms}", "memory_mib": "{memory_mib}"}}}],
//    "mount": {"ro": {"source": "{source}", "target": "{target}", "mode": "ro"},
//              "rw": {"source": "{source}", "target": "{target}", "mode": "rw"}},
//    "user": {"root": "root"},
//    "unsupported": ["cpu_ms", ...],
//    "result": "smolbox_json" | "exit_code",
//    "result_fields": {"exit_code": "/exitCode", "stdout": "/stdout", "stderr": "/stderr"}}
//
// The server ("server", optional) is started once for the battery and stopped after it: in the
// test internet's uplink namespace when there is one, as the whole sandbox under test is for a
// command profile's egress case. {api_socket} is a socket in the battery's work directory and
// {volume_root} that directory, which holds every case's directories and a copy of the payloads:
// a volume's {source} is a path relative to it.
//
// In a body, a string that is a placeholder and nothing else becomes a JSON value, and the member
// or element that holds it is left out when the case has nothing for it:
//   {argv}                   the interpreter, the payload, the case's args, the marker (array)
//   {env} {stdin} {mounts}   object, string, array of "mount" elements (payloads first)
//   {user}                   the "user" entry for the case's user
//   {timeout_ms} ... {files} a limit the case sets, as a number ({cpus} in CPUs, 0.5);
//   {timeout_s} {vcpus}      unset: left to the sandbox's default
//   {net} {allow_hosts} {allow_cidrs} {deny_cidrs} {net_limit}   the case's egress policy
// An object left empty by that is left out too. Other strings take scalar placeholders in place:
// the variables, {workdir}, {sandbox_name} (unique to the case), {api_socket}, {volume_root}, and
// in "mount" {source} and {target}.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "launch/profile.h"

namespace smolvm_check {

// Names an http profile's templates use that a profile may not declare as variables.
bool IsHttpPlaceholder(const std::string& name);

// Reads an http profile's own fields into p (p.http, p.user_args, p.egress from the placeholders
// its calls use); the common fields are the parser's.
Expected<void> ParseHttpFields(const nlohmann::json& doc, Profile& p);

// The checks across an http profile's fields: every placeholder known and in a place it can
// expand, {argv} once, exactly one result call, every limit used or declared unsupported.
Expected<void> ValidateHttpProfile(const Profile& p);

// What the runner knows only once the battery runs.
struct HttpRunValues {
  std::string api_socket;
  std::string volume_root;   // every host path of the case is beneath it
  std::string sandbox_name;  // unique to the case
};

// The case's plan for http-call: {"endpoint", "calls": [{method, path, body, result, always}],
// "result", "result_fields"}.
Expected<nlohmann::json> RenderHttpPlan(const Profile& p, const Case& c, const Placement& placement,
                                        const HttpRunValues& values);

// The server's command and the endpoint, with the variables and the run's values in place.
Expected<std::vector<std::string>> RenderHttpServer(const Profile& p, const HttpRunValues& values);
Expected<std::string> RenderHttpEndpoint(const Profile& p, const HttpRunValues& values);

}  // namespace smolvm_check
