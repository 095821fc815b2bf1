// A Backend runs a RunSpec and always returns a RunResult; failures are reported in it
// (setup_error, internal_error), never thrown.
//
//   auto backend = smolbox::MakeBackend(spec.backend);
//   if (!backend) { ...backend.error()... }
//   smolbox::RunResult r = (*backend)->Run(spec);        // start, one exec, tear down
//
// A Session is a started sandbox that serves many execs: the warm path.
//
//   smolbox::RunResult setup;
//   auto session = (*backend)->Start(spec, setup);        // null on failure; setup says why
//   smolbox::RunResult r = session->Exec(spec, stdin_data, /*cancel_fd=*/-1);
//   session.reset();                                       // tears everything down
#pragma once

#include <memory>
#include <string>

#include "smolbox/error.h"
#include "smolbox/result.h"
#include "smolbox/spec.h"

namespace smolbox {

class Session {
 public:
  virtual ~Session() = default;
  // Runs spec.argv with spec's env, workdir and per-exec limits (timeout, cpu time, output,
  // files); the sandbox-wide limits (memory, pids, cpus, storage) are the ones it started with.
  // rw volumes are copied back after every exec. cancel_fd, unless -1, is watched during the
  // exec: once it is readable or hung up (the caller went away), the workload is ended.
  virtual RunResult Exec(const RunSpec& spec, std::string stdin_data, int cancel_fd) = 0;
  // Readable once the sandbox has died on its own: its agent, or its VM, ended.
  virtual int death_fd() const = 0;
  // Why a dead sandbox died, for the user; empty while it lives.
  virtual std::string DeathReason() const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // Starts a sandbox for spec (its argv is not used). On failure returns null, with
  // setup_result's status and error saying why. Its warnings and timings are the setup's.
  virtual std::unique_ptr<Session> Start(const RunSpec& spec, RunResult& setup_result) = 0;
  // Start, one Exec of spec (stdin from spec), teardown.
  RunResult Run(const RunSpec& spec);
};

// kAuto resolves to the best backend this host can run.
Expected<std::unique_ptr<Backend>> MakeBackend(BackendKind kind);

}  // namespace smolbox
