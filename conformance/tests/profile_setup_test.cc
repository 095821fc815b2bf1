// A profile's setup and teardown (launch/profile_setup.h): run once around the cases, with the
// variables and {profile_dir}; a failed setup stops the run, names itself, and is still torn down.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "battery/json_check.h"
#include "check_runner.h"
#include "launch/profile.h"
#include "test_support.h"

namespace smolvm_check {
namespace {

using smolbox::testing::TempDir;
namespace fs = std::filesystem;

// The host, as null runs it, but each case only runs when the setup has left "up" beside the
// profile: a case run before the setup, or without it, fails.
nlohmann::json HostProfile() {
  return {
      {"name", "setup-test"},
      {"description", "the host, behind a setup"},
      {"command", {"/bin/sh", "-c", "test -f {profile_dir}/up && exec \"$@\"", "sh", "{argv...}"}},
      {"paths", "host"},
      {"result", "exit_code"},
      {"unsupported",
       {"timeout_ms", "cpu_ms", "memory_mib", "cpus", "pids", "storage_mib", "output_bytes",
        "files"}},
      {"teardown",
       {"/bin/sh", "-c", "rm -f {profile_dir}/up; echo {greeting} > {profile_dir}/down"}},
      {"variables", {{"greeting", "bye"}}}};
}

TEST(ProfileSetup, runs_before_the_cases_and_the_teardown_after_them) {
  TempDir dir("profile-setup");
  nlohmann::json profile = HostProfile();
  profile["setup"] = {"/bin/sh", "-c", "echo up > {profile_dir}/up"};
  std::string path = dir.Write("setup-test.json", profile.dump());
  auto run = RunCheck({"run", "--sandbox", path, "--filter", "functional.hello.*", "--json"});
  ASSERT_TRUE(run.report.is_object()) << run.err;
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(run.report["summary"]["pass"], 3);
  EXPECT_FALSE(fs::exists(dir.path() + "/up")) << "the teardown did not run";
  auto down = ReadTextFile(dir.path() + "/down", 100);
  ASSERT_TRUE(down) << "the teardown did not run";
  EXPECT_EQ(*down, "bye\n");
}

TEST(ProfileSetup, without_it_the_cases_here_fail) {
  TempDir dir("profile-setup");
  std::string path = dir.Write("setup-test.json", HostProfile().dump());
  auto run = RunCheck({"run", "--sandbox", path, "--filter", "functional.hello.sh", "--json"});
  ASSERT_TRUE(run.report.is_object()) << run.err;
  EXPECT_EQ(run.exit_code, 1);
}

TEST(ProfileSetup, a_failed_setup_runs_no_case_names_itself_and_is_torn_down) {
  TempDir dir("profile-setup");
  nlohmann::json profile = HostProfile();
  profile["setup"] = {"/bin/sh", "-c",
                      "echo up > {profile_dir}/up; echo the engine did not start >&2; exit 3"};
  profile["command"] = {"/bin/sh", "-c", "touch {profile_dir}/ran && exec \"$@\"", "sh",
                        "{argv...}"};
  std::string path = dir.Write("setup-test.json", profile.dump());
  auto run = RunCheck({"run", "--sandbox", path, "--filter", "functional.hello.sh"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("setup: \"/bin/sh\" exited 3: the engine did not start"),
            std::string::npos)
      << run.err;
  EXPECT_FALSE(fs::exists(dir.path() + "/ran")) << "a case ran after the setup failed";
  EXPECT_FALSE(fs::exists(dir.path() + "/up")) << "the teardown did not run after the failed setup";
  EXPECT_TRUE(fs::exists(dir.path() + "/down"));
}

TEST(ProfileSetup, takes_only_the_variables_and_profile_dir) {
  TempDir dir("profile-setup");
  nlohmann::json profile = HostProfile();
  profile["setup"] = {"/bin/sh", "-c", "mkdir {workdir}"};
  auto parsed = ParseProfile(profile.dump(), dir.path() + "/setup-test.json");
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.error().ToString().find("setup[2]: unknown placeholder {workdir}"),
            std::string::npos)
      << parsed.error().ToString();
  profile["variables"] = {{"profile_dir", "/elsewhere"}};
  parsed = ParseProfile(profile.dump(), dir.path() + "/setup-test.json");
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.error().ToString().find("\"profile_dir\" cannot be a variable name"),
            std::string::npos)
      << parsed.error().ToString();
}

TEST(ProfileSetup, profile_dir_is_the_directory_of_the_profile_file) {
  TempDir dir("profile-setup");
  nlohmann::json profile = HostProfile();
  profile["setup"] = {"{profile_dir}/helper", "start"};
  auto parsed = ParseProfile(profile.dump(), dir.path() + "/setup-test.json");
  ASSERT_TRUE(parsed) << parsed.error().ToString();
  EXPECT_EQ(parsed->setup,
            (std::vector<std::string>{fs::path(dir.path()).string() + "/helper", "start"}));
}

}  // namespace
}  // namespace smolvm_check
