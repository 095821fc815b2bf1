// `smolvm-check bench`: cold-start, warm-exec, transform, egress and API times of sandboxes on
// this host, side by side.
//
//   smolvm-check bench [--sandbox S ...] [--lang python|js] [--runs N] [--no-transform]
//                      [--no-egress] [--no-api] [--burst N] [--report-dir DIR] [--json]
//
// Without --sandbox: null (the bare interpreter, the baseline), smolbox:ns, the vm backend this
// host can run (smolbox:vm on KVM, else smolbox:vm-tcg), and bwrap and runsc where installed.
#pragma once

#include <CLI/CLI.hpp>

namespace smolvm_check {

// Registers the subcommand; its callback stores the exit code: 0 when every run passed, 1 when
// any failed, 2 on bad input.
void AddBenchCommand(CLI::App& app, int& exit_code);

}  // namespace smolvm_check
