#include "check_runner.h"

#include "test_support.h"

namespace smolvm_check {

Invocation RunCheck(std::vector<std::string> args) {
  args.insert(args.begin(), std::string(SMOLBOX_BIN_DIR) + "/smolvm-check");
  smolbox::testing::ProgramRun run = smolbox::testing::RunProgram(args);
  Invocation inv;
  inv.exit_code = run.exit_code;
  inv.out = std::move(run.out);
  inv.err = std::move(run.err);
  inv.report = nlohmann::json::parse(inv.out, nullptr, false);
  return inv;
}

}  // namespace smolvm_check
