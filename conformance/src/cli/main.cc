// smolvm-check: verifies what a sandbox really holds.
//
//   smolvm-check run | host | remote github | bench | mutate  (and http-call, the runner's)
//     (cli/run_command.h, cli/host_command.h, remote/remote_command.h, bench/bench_command.h,
//      cli/mutate_command.h)
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <string>

#include "bench/bench_command.h"
#include "cli/host_command.h"
#include "cli/mutate_command.h"
#include "cli/run_command.h"
#include "launch/http_call.h"
#include "remote/remote_command.h"

int main(int argc, char** argv) {
  CLI::App app{"smolvm-check: verifies what a sandbox really holds"};
  app.set_version_flag("--version", std::string("smolvm-check ") + SMOLVM_CHECK_VERSION);
  app.require_subcommand(1);
  int exit_code = smolvm_check::kExitUsage;
  smolvm_check::AddRunCommand(app, exit_code);
  smolvm_check::AddHostCommand(app, exit_code);
  smolvm_check::AddRemoteCommand(app, exit_code);
  smolvm_check::AddBenchCommand(app, exit_code);
  smolvm_check::AddMutateCommand(app, exit_code);
  smolvm_check::AddHttpCallCommand(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "smolvm-check: {}\n", e.what());
    return smolvm_check::kExitUsage;
  }
  return exit_code;
}
