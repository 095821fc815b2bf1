// Judges one case from the host: status, wall time, evidence in the output, canaries,
// leftovers and writes. The first failing oracle gives the reason.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "battery/catalog.h"

namespace smolvm_check {

enum class Verdict { kPass, kFail, kError, kSkip };
std::string ToString(Verdict verdict);

// Everything the runner saw of one case, host-side.
struct Evidence {
  std::string status;  // RunResult status names; from the sandbox's JSON or its exit code
  int64_t wall_ms = 0;
  std::string stdout_data;
  std::string stderr_data;
  std::map<std::string, std::string> outputs;  // "out/file" -> content, from rw mounts
  std::vector<std::string> leaked_canaries;    // from CanarySet::Leaked over all of the above
  std::vector<std::string> detections;         // from CanarySet::Detections
  std::vector<std::string> leftovers;          // processes, mounts, temp dirs still there
  std::vector<std::string> stray_writes;       // writes outside the declared outputs, on the
                                               // host, and unsafe entries in the outputs
  std::string setup_error;                     // the case could not be run: verdict error
  std::string sandbox_timings;                 // the sandbox's own account of where the time
                                               // went ("boot 3992 ms, ..."), where it gives one
};

struct Judgement {
  Verdict verdict = Verdict::kError;
  std::string reason;  // empty on pass
};

Judgement Judge(const Case& c, const Evidence& evidence);

}  // namespace smolvm_check
