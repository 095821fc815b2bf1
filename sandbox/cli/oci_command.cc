#include "oci_command.h"

namespace smolbox::cli {
namespace {

// Flags engines pass that mean nothing to smolbox: it keeps its own cgroups and never uses a
// kernel keyring, and it always pivots into the container's root.
void AcceptEngineFlags(CLI::App& command, bool create) {
  if (!create) return;
  command.add_flag("--no-pivot")
      ->description("accepted for runc compatibility; smolbox always pivots");
  command.add_flag("--no-new-keyring")
      ->description("accepted for runc compatibility; smolbox makes no keyring");
  command.add_option("--preserve-fds", "refused unless 0: smolbox passes only stdio")
      ->check(CLI::IsMember({"0"}));
}

void AddCreateFlags(CLI::App& command, OciFlags& f) {
  command.add_option("-b,--bundle", f.create.bundle,
                     "the bundle directory (default: the working directory)");
  command.add_option("--pid-file", f.create.pid_file, "where to write the container's pid");
  command.add_option("--console-socket", f.create.console_socket,
                     "a unix socket that receives the pty's master");
  command.add_option("id", f.create.id, "the container's id")->required();
  AcceptEngineFlags(command, true);
}

// runc's exec flags. Those that ask for what smolbox never grants (capabilities, labels, another
// cgroup) are accepted and mean nothing: the process gets the container's confinement.
void AddExecFlags(CLI::App& command, oci::ExecOptions& e) {
  command.add_option("-p,--process", e.process, "a process.json: the process to run");
  command.add_option("--pid-file", e.pid_file, "where to write the process's pid");
  command.add_option("--console-socket", e.console_socket,
                     "a unix socket that receives the pty's master");
  command.add_flag("-d,--detach", e.detach, "return once it runs");
  command.add_flag("-t,--tty", e.tty, "give the process a pty (without --process)");
  command.add_option("--cwd", e.cwd, "its working directory (without --process)");
  command.add_option("-e,--env", e.env, "NAME=VALUE, over the config's (without --process)");
  command.add_option("-u,--user", e.user, "UID[:GID] (without --process)");
  command.add_option("-g,--additional-gids",
                     "accepted; a smolbox workload has no supplementary groups");
  command.add_option("-c,--cap", "accepted; a smolbox workload has no capabilities");
  command.add_flag("--no-new-privs")->description("accepted; smolbox always sets no_new_privs");
  command.add_option("--apparmor", "accepted; smolbox's own confinement holds the process");
  command.add_option("--process-label", "accepted; smolbox's own confinement holds the process");
  command.add_option("--cgroup", "accepted; the process is in the container's cgroup");
  command.add_flag("--ignore-paused")->description("accepted; smolbox never pauses a container");
  command.add_option("--preserve-fds", "refused unless 0: smolbox passes only stdio")
      ->check(CLI::IsMember({"0"}));
  command.add_option("id", e.id, "the container's id")->required();
  // The command and its arguments (without --process) follow the id, and its flags are its own
  // (`-c` is sh's, not --cap): parsing stops at its first word, and the rest is the command.
  command.prefix_command();
}

}  // namespace

CLI::App* AddOciCommand(CLI::App& app, OciFlags& f) {
  CLI::App* oci = app.add_subcommand(
      "oci", "the OCI runtime command line (as runc), for docker, podman and containerd");
  oci->add_option("--root", f.global.root,
                  "where containers' state is kept (default /run/smolbox-oci)");
  oci->add_option("--log", f.global.log,
                  "a file that errors and notes are appended to, as engines read them");
  oci->add_option("--log-format", f.log_format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
  oci->add_option("--backend", f.backend,
                  "ns or vm (default: the annotation io.smolbox.backend, else ns)")
      ->check(CLI::IsMember({"auto", "ns", "vm"}));
  oci->add_flag("--systemd-cgroup")
      ->description("accepted for runc compatibility; smolbox keeps cgroups of its own");
  oci->add_flag("--debug")->description("accepted for runc compatibility");
  oci->add_option("--rootless", "accepted for runc compatibility");
  oci->add_option("--criu", "accepted for runc compatibility; checkpoints are not supported");
  oci->require_subcommand(1);

  AddCreateFlags(*oci->add_subcommand("create", "create a container from a bundle; start runs it"),
                 f);
  CLI::App* run =
      oci->add_subcommand("run", "create and start a container, and wait for it unless --detach");
  AddCreateFlags(*run, f);
  run->add_flag("-d,--detach", f.detach, "return once it has started");
  oci->add_subcommand("start", "run a created container's process")
      ->add_option("id", f.id)
      ->required();
  oci->add_subcommand("state", "print a container's state JSON")
      ->add_option("id", f.id)
      ->required();
  CLI::App* kill = oci->add_subcommand("kill", "send a container a signal, which ends it");
  kill->add_option("id", f.id)->required();
  kill->add_option("signal", f.signal, "a name or number (default SIGTERM)");
  kill->add_flag("-a,--all", f.all, "every process of the container: they all end with it");
  CLI::App* del =
      oci->add_subcommand("delete", "remove a stopped container (running too, with --force)");
  del->add_option("id", f.id)->required();
  del->add_flag("-f,--force", f.force, "stop it first when it runs");
  CLI::App* ps = oci->add_subcommand("ps", "list a container's processes (host pids)");
  ps->add_option("-f,--format", f.ps_format, "table or json")
      ->check(CLI::IsMember({"table", "json"}));
  ps->add_option("id", f.id)->required();
  oci->add_subcommand("features", "print what this runtime supports, as JSON");
  AddExecFlags(*oci->add_subcommand("exec", "run another process in a running container"), f.exec);
  return oci;
}

int RunOciCommand(const CLI::App& oci, OciFlags& f) {
  f.global.json_log = f.log_format == "json";
  if (f.backend != "auto") f.global.backend = *ParseBackendKind(f.backend);
  const oci::GlobalOptions& g = f.global;
  if (oci.got_subcommand("create")) return oci::Create(g, f.create);
  if (oci.got_subcommand("run")) return oci::Run(g, f.create, f.detach);
  if (oci.got_subcommand("start")) return oci::Start(g, f.id);
  if (oci.got_subcommand("state")) return oci::State(g, f.id);
  if (oci.got_subcommand("kill")) return oci::Kill(g, f.id, f.signal);
  if (oci.got_subcommand("delete")) return oci::Delete(g, f.id, f.force);
  if (oci.got_subcommand("ps")) return oci::Ps(g, f.id, f.ps_format == "json");
  if (oci.got_subcommand("features")) return oci::Features();
  if (const CLI::App* exec = oci.get_subcommand("exec"); exec->parsed()) {
    f.exec.args = exec->remaining();
    return oci::Exec(g, f.exec);
  }
  return 1;
}

}  // namespace smolbox::cli
