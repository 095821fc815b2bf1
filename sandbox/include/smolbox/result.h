// RunResult: how a run ended, what it printed, what it used.
//
//   smolbox::RunResult r = backend->Run(spec);
//   std::cout << smolbox::ToJson(r).dump(2);
//   return smolbox::CliExitCode(r);   // 124 on timeout, 128+N on a kill, ...
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "smolbox/error.h"

namespace smolbox {

enum class Status {
  kExited,
  kSignaled,
  kTimeout,
  kCpuLimit,
  kMemoryLimit,
  kOutputLimit,
  kViolation,  // killed by the seccomp policy
  kSetupError,
  kInternalError,
};

struct Usage {
  int64_t wall_ms = 0;
  int64_t cpu_ms = 0;
  int64_t peak_memory_bytes = 0;
};

struct Timings {
  int64_t setup_ms = 0;  // everything before the workload starts, boot included
  int64_t boot_ms = 0;   // vm: QEMU started to the agent ready; 0 for ns
  int64_t run_ms = 0;
  int64_t teardown_ms = 0;
};

// One DNS query or one connection the sandbox asked the egress gateway for.
struct EgressEvent {
  std::string kind;     // "dns" or "tcp"
  std::string name;     // dns: the name asked; tcp: the names the address was resolved from
  std::string address;  // tcp: the destination; dns: the addresses answered, comma-separated
  int port = 0;         // tcp
  std::string type;     // dns: "A", "AAAA", "TXT", ...
  bool allowed = false;
  std::string reason;
  int64_t bytes_in = 0;   // to the sandbox
  int64_t bytes_out = 0;  // from the sandbox
  friend bool operator==(const EgressEvent&, const EgressEvent&) = default;
};

struct RunResult {
  Status status = Status::kInternalError;
  int exit_code = -1;  // set when status is kExited
  int signal = 0;      // the signal that ended the workload, if one did
  std::string stdout_data;
  std::string stderr_data;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  Usage usage;
  std::vector<std::string> limits_hit;  // "pids", "storage", "files", "net"
  Timings timings;
  std::string backend;    // "ns" or "vm"
  std::string isolation;  // "namespaces", "kvm" or "tcg"
  std::vector<std::string> warnings;
  std::vector<EgressEvent> egress;  // in the order the gateway decided them
  std::string error;  // for setup_error and internal_error: what failed

  void Warn(std::string text) { warnings.push_back(std::move(text)); }
};

std::string ToString(Status status);
// A status travels in JSON as its name; from_json throws nlohmann's other_error for an unknown
// one, as the JSON edge may.
void to_json(nlohmann::json& json, const Status& status);
void from_json(const nlohmann::json& json, Status& status);
nlohmann::json ToJson(const RunResult& result);
// A sandbox's start, which ran nothing: only what a Backend::Start fills in (status, error,
// backend, isolation, timings, warnings).
nlohmann::json SetupToJson(const RunResult& setup);
// The inverse of ToJson, for results that crossed a process boundary; a missing or mistyped
// field is an error naming it.
Expected<RunResult> ResultFromJson(const nlohmann::json& json);
// Exit code of `smolbox run` for this result, after timeout(1) and docker.
int CliExitCode(const RunResult& result);
// Replaces each invalid UTF-8 sequence with U+FFFD, so the text can go into JSON.
std::string ToValidUtf8(std::string_view text);

}  // namespace smolbox
