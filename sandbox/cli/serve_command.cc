#include "serve_command.h"

#include <fmt/format.h>

#include "api_server.h"
#include "launch.h"
#include "mcp_server.h"
#include "smolbox/spec.h"
#include "smolbox/units.h"

namespace smolbox::cli {
namespace {

constexpr int kExitUsage = 125;

int Refuse(const Error& error) {
  fmt::print(stderr, "smolbox: {}\n", error.ToString());
  return kExitUsage;
}

}  // namespace

CLI::App* AddServeCommand(CLI::App& app, ServeFlags& f) {
  CLI::App* serve = app.add_subcommand("serve", "serve the HTTP API: runs, persistent sandboxes and execs");
  serve->add_option("--listen", f.listen,
                    "unix:PATH or tcp:HOST:PORT; repeatable (default unix:<state dir>/api.sock, mode 0600)")
      ->type_name("ADDRESS")
      ->allow_extra_args(false);
  serve->add_option("--token-file", f.token_file, "the bearer token clients send; required by tcp listeners")
      ->type_name("FILE");
  serve->add_option("--tls-cert", f.tls_cert, "PEM certificate; required by tcp listeners off loopback")
      ->type_name("FILE");
  serve->add_option("--tls-key", f.tls_key, "PEM private key of --tls-cert")->type_name("FILE");
  serve->add_option("--max-sandboxes", f.max_sandboxes, "sandboxes held at once (default 32)")->type_name("N");
  serve->add_option("--max-body", f.max_body, "the largest request body (default 64M)")->type_name("SIZE");
  serve->add_option("--max-concurrent-execs", f.max_concurrent_execs, "runs and execs at once (default 16)")
      ->type_name("N");
  serve->add_option("--max-queued", f.max_queued,
                    "runs and execs over --max-concurrent-execs that wait their turn, in order, each at most "
                    "its own timeout; past them a request gets 429 with Retry-After (default 512)")
      ->type_name("N");
  serve->add_option("--max-queue-wait", f.max_queue_wait,
                    "the longest a request waits in that queue, whatever its timeout: a client that left while it "
                    "waited holds its place no longer (default 5m)")
      ->type_name("DUR");
  serve->add_option("--pool", f.pools,
                    "BACKEND[:IMAGE]=N: keep N sandboxes ready (BACKEND ns, vm, vm-kvm or vm-tcg) for one-shot runs "
                    "that name that backend and image and otherwise use the defaults; repeatable")
      ->type_name("POOL")
      ->allow_extra_args(false);
  serve->add_option("--volume-root", f.volume_root,
                    "accept volumes whose source is a path relative to DIR, opened beneath it without following "
                    "any symlink (default: no volumes)")
      ->type_name("DIR");
  serve->add_option("--drain-timeout", f.drain_timeout,
                    "on SIGTERM, how long in-flight requests may finish before they are cancelled (default 30s)")
      ->type_name("DUR");
  serve->footer(
      "Sandboxes made through the API live as long as the server: when it stops, or dies, they are\n"
      "torn down. Clients name no host paths: stdin files and rootfs directories are refused, and\n"
      "volumes too unless --volume-root gives them a directory to stay beneath.");
  return serve;
}

int RunServeCommand(const ServeFlags& f, const std::string& exe) {
  api::ServeOptions options;
  for (const std::string& text : f.listen) {
    auto address = api::ParseListenAddress(text);
    if (!address) return Refuse(address.error());
    options.listen.push_back(*address);
  }
  options.token_file = f.token_file;
  options.tls_cert = f.tls_cert;
  options.tls_key = f.tls_key;
  options.max_sandboxes = f.max_sandboxes;
  options.max_concurrent_execs = f.max_concurrent_execs;
  options.max_queued = f.max_queued;
  auto body = ParseBytes(f.max_body);
  if (!body) return Refuse(Error::Field("--max-body", body.error().what));
  options.max_body = static_cast<size_t>(*body);
  auto drain = ParseDuration(f.drain_timeout);
  if (!drain) return Refuse(Error::Field("--drain-timeout", drain.error().what));
  options.drain_timeout_ms = *drain;
  auto queue_wait = ParseDuration(f.max_queue_wait);
  if (!queue_wait) return Refuse(Error::Field("--max-queue-wait", queue_wait.error().what));
  options.max_queue_wait_ms = *queue_wait;
  for (const std::string& text : f.pools) {
    auto pool = api::ParsePoolOption(text);
    if (!pool) return Refuse(pool.error());
    options.pools.push_back(std::move(*pool));
  }
  options.volume_root = f.volume_root;
  options.smolbox_exe = exe;
  return api::Serve(options);
}

CLI::App* AddMcpCommand(CLI::App& app, McpFlags& f) {
  CLI::App* mcp = app.add_subcommand("mcp", "serve the Model Context Protocol on stdio, for AI agents");
  mcp->add_option("--backend", f.backend, "every sandbox's backend: ns or vm (default auto)")->type_name("KIND");
  mcp->add_option("--max-sandboxes", f.max_sandboxes, "sandboxes one session holds at once (default 8)")
      ->type_name("N");
  mcp->add_option("--volume-root", f.volume_root,
                  "accept volumes whose source is a path relative to DIR, as serve --volume-root does "
                  "(default: no volumes)")
      ->type_name("DIR");
  mcp->add_flag("--allow-egress", f.allow_egress,
                "let a call give its sandbox an egress policy (egress: allow_hosts, ...); without it every "
                "sandbox has no network, and a call that asks for one is refused");
  mcp->footer(
      "Tools: run_code, create_sandbox, exec, write_file, read_file, remove_sandbox; run_code and\n"
      "create_sandbox take a RunSpec's fields. No network unless --allow-egress and a call's egress\n"
      "allows hosts, and 30 s per run unless its limits say otherwise. The session's sandboxes end\n"
      "with it.");
  return mcp;
}

int RunMcpCommand(const McpFlags& f, const std::string& exe) {
  if (!f.backend.empty()) {
    if (auto kind = ParseBackendKind(f.backend); !kind) return Refuse(Error::Field("--backend", kind.error().what));
  }
  if (f.max_sandboxes < 1) return Refuse(Error::Field("--max-sandboxes", "must be at least 1"));
  if (!f.volume_root.empty()) {
    if (auto checked = api::CheckVolumeRoot(f.volume_root); !checked) return Refuse(checked.error());
  }
  return api::ServeMcp({exe, f.backend, f.max_sandboxes, f.volume_root, f.allow_egress});
}

}  // namespace smolbox::cli
