#include "check_runner.h"

#include "test_support.h"

namespace smolvm_check {

namespace {

Invocation Run(const std::vector<std::string>& argv) {
  smolbox::testing::ProgramRun run = smolbox::testing::RunProgram(argv);
  Invocation inv;
  inv.exit_code = run.exit_code;
  inv.out = std::move(run.out);
  inv.err = std::move(run.err);
  inv.report = nlohmann::json::parse(inv.out, nullptr, false);
  return inv;
}

}  // namespace

Invocation RunCheck(std::vector<std::string> args) {
  args.insert(args.begin(), std::string(SMOLBOX_BIN_DIR) + "/smolvm-check");
  return Run(args);
}

Invocation RunCheckWithoutRoot(std::vector<std::string> args) {
  args.insert(args.begin(), {std::string(SMOLVM_CHECK_SOURCE_DIR) + "/test_support/as-unprivileged", "65534",
                             std::string(SMOLBOX_BIN_DIR) + "/smolvm-check"});
  return Run(args);
}

}  // namespace smolvm_check
