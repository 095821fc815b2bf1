// What the post-fork child reports when a step before execve fails.
//
// The child writes one SetupFailure over a CLOEXEC pipe and exits; a successful execve closes
// the pipe instead, so the agent reads either 0 bytes (the workload runs) or one record.
//
//   if (chdir(plan.cwd) != 0) ReportAndExit(plan.error_fd, Failed(SetupStep::kChdir));
#pragma once

#include <cerrno>
#include <cstdint>
#include <string_view>

namespace smolbox::agent {

enum class SetupStep : int32_t {
  kNone = 0,
  kSignals,
  kSetsid,
  kStdio,
  kCloseRange,
  kChdir,
  kRlimitNofile,
  kRlimitCpu,
  kRlimitData,
  kRlimitNproc,
  kRlimitFsize,
  kRlimitCore,
  kCapBound,
  kSetgroups,
  kSetresgid,
  kSetresuid,
  kCapAmbient,
  kCapset,
  kNoNewPrivs,
  kSeccomp,
  kJoinCgroup,
  kCgroupNamespace,
};

// Plain data, so that it crosses the pipe as raw bytes in a single atomic write.
struct SetupFailure {
  SetupStep step = SetupStep::kNone;
  int32_t err = 0;

  explicit operator bool() const { return step != SetupStep::kNone; }
};

inline SetupFailure Failed(SetupStep step, int err = errno) { return SetupFailure{step, err}; }

// "chdir", "setrlimit(RLIMIT_NOFILE)", ...: the step as a user reads it in an error.
std::string_view StepName(SetupStep step);

}  // namespace smolbox::agent
