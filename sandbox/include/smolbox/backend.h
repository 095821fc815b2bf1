// A Backend runs one RunSpec to completion and always returns a RunResult;
// failures are reported in it (setup_error, internal_error), never thrown.
//
//   auto backend = smolbox::MakeBackend(spec.backend);
//   if (!backend) { ...backend.error()... }
//   smolbox::RunResult r = (*backend)->Run(spec);
#pragma once

#include <memory>

#include "smolbox/error.h"
#include "smolbox/result.h"
#include "smolbox/spec.h"

namespace smolbox {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual RunResult Run(const RunSpec& spec) = 0;
};

// kAuto resolves to the best backend this host can run.
Expected<std::unique_ptr<Backend>> MakeBackend(BackendKind kind);

}  // namespace smolbox
