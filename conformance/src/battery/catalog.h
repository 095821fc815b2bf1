// The battery: cases loaded from adversarial/catalog.json, each naming its payload, the limits
// it runs under and what the host-side oracles expect.
//
//   auto catalog = LoadCatalog("adversarial/catalog.json");   // payload paths resolved
//   if (!catalog) { fmt::print("{}\n", catalog.error().ToString()); return 2; }
//
// Schema (every field is checked; an unknown field is an error naming the case and field):
//   {"version": 1, "cases": [{
//     "id": "cpu.while_true.python",            unique, [a-z0-9_.]+
//     "description": "spins forever",            optional
//     "category": "cpu",                         one of kCategories
//     "kind": "adversarial" | "functional",
//     "lang": "python" | "js" | "sh",
//     "payload": "python/while_true.py",         relative to the catalog's directory
//     "user": "root",                            optional: "sandbox" (default) or "root", the
//                                                workload as root inside (the profile's "user")
//     "args": ["{canary_file}", "8"],            placeholders: see runner.h
//     "stdin": "text",                           optional
//     "env": {"K": "V"},                         optional
//     "limits": {"timeout_ms": 2000, ...},       optional; the RunSpec limit names
//     "mounts": [{"name": "in", "mode": "ro", "target": "/in",
//                 "files": {"data.csv": "a,b\n"},    files planted before the run
//                 "path_canary": true}],           optional: a canary token in the name of
//                                                  the mount's host directory
//     "expect": {
//       "status": ["timeout"],                   allowed statuses (RunResult names)
//       "max_wall_ms": 6000,
//       "stdout_contains": ["hello"],            each must appear in stdout
//       "forbid": ["BREACH"],                    regexes that must not match stdout or stderr
//       "max_count": {"pattern": "SPAWNED (\\d+)", "max": 40},   the number must stay <= max
//       "outputs": {"out/result.json": "exact text"}           files the run must leave
//     },
//     "oracles": ["canaries", "leftovers", "writes", "sigurg", "tty"]   default: the first three
//     "egress": {"net": true,                    category egress only, and required there: the
//                "allow_host": ["api.allowed.test:80"],  policy the sandbox is given (open
//                "allow_cidr": ["192.0.2.10/32"],        egress, names, ranges); the case runs
//                "deny_cidr": ["192.0.2.20/32"],         on the test internet (test_internet.h).
//                "net_limit": 2048,                      Optional: ranges no allow reaches,
//                "trust_test_ca": true}                  the bytes the sandbox may send in all,
//                                                and whether the sandbox trusts the test
//                                                internet's CA (a profile without words for
//                                                them skips)
//   }]}
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "smolbox/error.h"

namespace smolvm_check {

using smolbox::Error;
using smolbox::Expected;

inline const std::vector<std::string> kCategories = {
    "cpu", "memory", "pids", "disk", "output", "network", "filesystem",
    "privilege", "info", "signals", "time", "functional", "egress"};

// Who the workload is inside the sandbox: the sandbox's own unprivileged user, or its root.
inline const std::vector<std::string> kCaseUsers = {"sandbox", "root"};

// The RunSpec limit names a case may set, in the order reports list them.
inline const std::vector<std::string> kLimitNames = {
    "timeout_ms", "cpu_ms", "memory_mib", "cpus", "pids", "storage_mib", "output_bytes", "files"};

// Where a case's payload directory (read-only) and its workdir are inside a sandbox whose paths
// are its own: part of what a case is, so that the catalog can keep its mounts off the payloads.
inline constexpr const char* kPayloadTarget = "/payload";
inline constexpr const char* kSandboxWorkdir = "/work";

struct CaseMount {
  std::string name;    // how args and expect.outputs refer to it: {mount:in}, "in/file"
  std::string target;  // path inside the sandbox
  bool read_only = true;
  std::map<std::string, std::string> files;  // relative path -> content, planted before the run
  // The host directory's name carries a fresh canary token, so that a sandbox that shows the
  // workload where its mounts come from leaks the token.
  bool path_canary = false;
  // The host directory and its files are writable by anyone (0777, 0666), as shared data often
  // is: then only the sandbox's read-only flag keeps a ro mount unwritten.
  bool world_writable = false;
};

struct MaxCount {
  std::string pattern;  // one capture group holding a number
  int64_t max = 0;
};

struct Expect {
  std::vector<std::string> status;
  int64_t max_wall_ms = 0;
  std::vector<std::string> stdout_contains;
  std::vector<std::string> forbid;
  std::optional<MaxCount> max_count;
  std::map<std::string, std::string> outputs;
};

// The egress policy a case runs under, in the words of smolbox's flags: --net, --allow-host
// NAME[:PORT], --allow-cidr CIDR[:PORT] (at least one of these three is set), --deny-cidr CIDR
// and --net-limit BYTES.
struct CaseEgress {
  bool net = false;
  std::vector<std::string> allow_host;
  std::vector<std::string> allow_cidr;
  std::vector<std::string> deny_cidr;
  std::optional<int64_t> net_limit;
  // The sandbox trusts the test internet's CA (its PEM is added to the sandbox's store), so that
  // a client verifying TLS as it does by default can talk to the test servers.
  bool trust_test_ca = false;
};

struct Case {
  std::string id;
  std::string category;
  bool adversarial = true;
  std::string lang;
  std::string payload;  // absolute path once loaded
  std::string user = "sandbox";  // one of kCaseUsers
  std::vector<std::string> args;
  std::optional<std::string> stdin_data;
  std::map<std::string, std::string> env;
  std::map<std::string, int64_t> limits;  // RunSpec limit name -> value; cpus in milli-cpus
  std::vector<CaseMount> mounts;
  Expect expect;
  std::vector<std::string> oracles;
  std::string description;  // optional "description": what the case tries, for humans
  std::optional<CaseEgress> egress;

  std::string Kind() const { return adversarial ? "adversarial" : "functional"; }
  bool HasOracle(const std::string& name) const;
  // The limit, or the RunSpec default when the case does not set it.
  int64_t Limit(const std::string& name) const;
};

struct Catalog {
  std::string directory;  // payload paths are relative to it
  std::vector<Case> cases;
};

Expected<Catalog> LoadCatalog(const std::string& path);
// The catalog in text, as if read from path: payloads are relative to path's directory.
Expected<Catalog> ParseCatalog(const std::string& text, const std::string& path);
// Cases whose id matches one of the globs (fnmatch; none, or an empty one, takes all) and whose
// category matches, if given.
std::vector<Case> SelectCases(const Catalog& catalog, const std::vector<std::string>& globs,
                              const std::string& category);

}  // namespace smolvm_check
