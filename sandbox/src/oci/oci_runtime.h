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
#include <vector>

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
struct ExecOptions {
  std::string id;
  std::string process;         // a process.json; empty: the config's process with the flags over it
  std::string pid_file;        // where the exec's pid (its monitor's) is written once it runs
  std::string console_socket;  // with a terminal: where the pty's master is sent
  bool detach = false;         // return once it runs; its pid exits with the process's status
  // Without --process: the command, and what replaces the config's process fields.
  std::vector<std::string> args;
  std::vector<std::string> env;  // NAME=VALUE, over the config's
  std::string cwd;
  std::string user;  // UID[:GID]
  bool tty = false;
};

// A second process in a running container (ns backend), beside its first: the sandbox serves it
// with an agent of its own (SandboxSpec::attach_socket), with the same confinement. Without
// detach, returns the process's exit status.
int Exec(const GlobalOptions& global, const ExecOptions& options);

}  // namespace smolbox::oci
