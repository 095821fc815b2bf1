// `smolbox oci`: the OCI runtime command line, as runc gives it, for engines that run
// containers through a runtime binary (podman, docker's and containerd's runc shim, CRI-O).
//
// A container is a smolbox sandbox with one process. `create` forks its monitor, which starts
// the sandbox (the bundle's rootfs, mounts and limits) and waits for `start`; the monitor's pid
// is the container's pid, the one the engine waits for and signals, and it exits with the
// process's exit status. docs/oci.md says what maps to what.
//
//   smolbox oci --root /run/x --log log.json --log-format json create --bundle B --pid-file P web1
//   smolbox oci start web1 && smolbox oci state web1 && smolbox oci kill web1 TERM
//   smolbox oci delete --force web1
#pragma once

#include <string>

#include "smolbox/spec.h"

namespace smolbox::oci {

struct GlobalOptions {
  std::string root;       // empty: DefaultRoot()
  std::string log;        // where errors and notes go too, as engines read them; empty: stderr only
  bool json_log = false;  // --log-format json
  BackendKind backend =
      BackendKind::kAuto;  // --backend; the annotation io.smolbox.backend otherwise
};

struct CreateOptions {
  std::string id;
  std::string bundle;          // empty: the working directory
  std::string pid_file;        // where the container's pid is written once it is created
  std::string console_socket;  // with process.terminal: where the pty's master is sent
};

// Each returns the exit code: 0, 1 on an error (said on stderr and in the log), or for run
// without detach the container's own.
int Create(const GlobalOptions& global, const CreateOptions& options);
int Start(const GlobalOptions& global, const std::string& id);
int State(const GlobalOptions& global, const std::string& id);
// signal: a name with or without SIG ("TERM", "SIGKILL") or a number.
int Kill(const GlobalOptions& global, const std::string& id, const std::string& signal);
int Delete(const GlobalOptions& global, const std::string& id, bool force);
int Run(const GlobalOptions& global, const CreateOptions& options, bool detach);
// json: the pids as a JSON array; otherwise a table of PID and command.
int Ps(const GlobalOptions& global, const std::string& id, bool json);
int Features();
// A second process in a running container: refused, naming why, until the agent runs
// concurrent execs.
int Exec(const GlobalOptions& global);

}  // namespace smolbox::oci
