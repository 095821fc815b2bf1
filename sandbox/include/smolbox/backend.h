// A Backend runs a RunSpec and always returns a RunResult; failures are reported in it
// (setup_error, internal_error), never thrown.
//
//   auto backend = smolbox::MakeBackend(spec.sandbox.backend);
//   if (!backend) { ...backend.error()... }
//   smolbox::RunResult r = (*backend)->Run(spec);        // start, one exec, tear down
//
// A Session is a started sandbox that serves many execs: the warm path.
//
//   smolbox::RunResult setup;
//   auto session = (*backend)->Start(spec.sandbox, setup);  // null on failure; setup says why
//   smolbox::RunResult r = session->Exec(spec.exec, {.stdin_fd = 0, .stdout_fd = 1, .stderr_fd = 2}, -1);
//   session.reset();                                         // tears everything down
#pragma once

#include <memory>
#include <string>

#include "smolbox/error.h"
#include "smolbox/result.h"
#include "smolbox/spec.h"

namespace smolbox {

// An exec's stdio on the host side. Stdin streams from stdin_fd until its EOF, or else is
// stdin_data (both empty: an empty stdin). Output is written to stdout_fd and stderr_fd as the
// workload writes it, under the output cap; where they are -1 it is collected into the result.
// The fds stay the caller's: they are neither closed nor made non-blocking.
struct ExecIo {
  int stdin_fd = -1;
  std::string stdin_data;
  int stdout_fd = -1;
  int stderr_fd = -1;
  bool has_stdin() const { return stdin_fd >= 0 || !stdin_data.empty(); }
};

class Session {
 public:
  virtual ~Session() = default;
  // Runs spec.argv with spec's env, workdir (the sandbox's when unset) and limits, within the
  // sandbox's own (memory, pids, cpus, storage). rw volumes are copied back after every exec.
  // cancel_fd, unless -1, is watched during the exec: once it is readable or hung up (the
  // caller went away), the workload is ended. spec's own stdin is not read here: io says what
  // the stdin is.
  virtual RunResult Exec(const ExecSpec& spec, const ExecIo& io, int cancel_fd) = 0;
  // Readable once the sandbox has died on its own: its agent, or its VM, ended.
  virtual int death_fd() const = 0;
  // Why a dead sandbox died, for the user; empty while it lives.
  virtual std::string DeathReason() const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // Starts a sandbox for spec. On failure returns null, with setup_result's status and error
  // saying why. Its warnings and timings are the setup's.
  virtual std::unique_ptr<Session> Start(const SandboxSpec& spec, RunResult& setup_result) = 0;
  // Start of spec.sandbox, one Exec of spec.exec, teardown. Stdin is io's when it has one, else
  // spec.exec's own (its stdin_file opened before anything starts, so that a bad one costs no
  // sandbox).
  RunResult Run(const RunSpec& spec, ExecIo io = {});
};

// kAuto resolves to the best backend this host can run.
Expected<std::unique_ptr<Backend>> MakeBackend(BackendKind kind);

}  // namespace smolbox
