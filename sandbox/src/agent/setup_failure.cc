#include "setup_failure.h"

namespace smolbox::agent {

std::string_view StepName(SetupStep step) {
  switch (step) {
    case SetupStep::kNone:
      return "none";
    case SetupStep::kSignals:
      return "reset signals";
    case SetupStep::kSetsid:
      return "setsid";
    case SetupStep::kStdio:
      return "dup2 stdio";
    case SetupStep::kCloseRange:
      return "close_range";
    case SetupStep::kChdir:
      return "chdir";
    case SetupStep::kRlimitNofile:
      return "setrlimit(RLIMIT_NOFILE)";
    case SetupStep::kRlimitCpu:
      return "setrlimit(RLIMIT_CPU)";
    case SetupStep::kRlimitData:
      return "setrlimit(RLIMIT_DATA)";
    case SetupStep::kRlimitNproc:
      return "setrlimit(RLIMIT_NPROC)";
    case SetupStep::kRlimitFsize:
      return "setrlimit(RLIMIT_FSIZE)";
    case SetupStep::kRlimitCore:
      return "setrlimit(RLIMIT_CORE)";
    case SetupStep::kCapBound:
      return "prctl(PR_CAPBSET_DROP)";
    case SetupStep::kSetgroups:
      return "setgroups";
    case SetupStep::kSetresgid:
      return "setresgid";
    case SetupStep::kSetresuid:
      return "setresuid";
    case SetupStep::kCapAmbient:
      return "prctl(PR_CAP_AMBIENT_CLEAR_ALL)";
    case SetupStep::kCapset:
      return "capset";
    case SetupStep::kNoNewPrivs:
      return "prctl(PR_SET_NO_NEW_PRIVS)";
    case SetupStep::kSeccomp:
      return "seccomp(SECCOMP_SET_MODE_FILTER)";
    case SetupStep::kJoinCgroup:
      return "join the workload cgroup";
    case SetupStep::kCgroupNamespace:
      return "unshare(CLONE_NEWCGROUP)";
  }
  return "unknown step";
}

}  // namespace smolbox::agent
