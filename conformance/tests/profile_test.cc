// Profiles: every shipped profile loads, bad profiles are errors naming the profile and field,
// and a case renders to the exact command line each sandbox is given.
#include "launch/profile.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "battery/json_check.h"
#include "test_support.h"

namespace smolvm_check {
namespace {

using nlohmann::json;
using Words = std::vector<std::string>;
using smolbox::testing::OnPath;
using smolbox::testing::ProgramRun;
using smolbox::testing::RunProgram;
using smolbox::testing::TempDir;

const std::string kProfiles = std::string(SMOLVM_CHECK_SOURCE_DIR) + "/conformance/profiles";
// As profile_parse.h's bound on a profile file.
constexpr size_t kMaxTestProfileBytes = 1 << 20;

// Sets an environment variable for one test, restoring it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// A profile with every field a sandbox-paths profile needs, to be broken one field at a time.
json GoodProfile() {
  return {{"name", "x"},
          {"command", {"sbx", "{limits...}", "{mounts...}", "{env...}", "--", "{argv...}"}},
          {"mount",
           {{"ro", {"--ro", "{source}", "{target}"}}, {"rw", {"--rw", "{source}", "{target}"}}}},
          {"env", {"--env", "{key}={value}"}},
          {"limit_args", {{"timeout_ms", {"--timeout", "{timeout_s}"}}}},
          {"unsupported",
           {"cpu_ms", "memory_mib", "cpus", "pids", "storage_mib", "output_bytes", "files"}},
          {"result", "exit_code"}};
}

std::string ParseError(const json& profile) {
  auto parsed = ParseProfile(profile.dump(), "test.json");
  return parsed ? "<parsed>" : parsed.error().ToString();
}

// A case that uses everything a profile renders: limits, stdin, mounts, env and arg hints.
Case CsvCase() {
  Case c;
  c.id = "functional.csv.python";
  c.lang = "python";
  c.payload = "/cat/python/csv.py";
  c.args = {"{mount:in}/data.csv", "{workdir}/x", "{canary_file}"};
  c.stdin_data = "text";
  c.env = {{"GREETING", "hi"}, {"LANG", "C"}};
  c.limits = {{"timeout_ms", 2500}, {"cpus", 500}, {"output_bytes", 65536}};
  c.mounts = {{"in", "/in", true, {}}, {"out", "/out", false, {}}};
  return c;
}

Placement CsvPlacement() {
  Placement p;
  p.mount_sources = {{"in", "/host/case/in"}, {"out", "/host/case/out"}};
  p.payload_dir = "/cat";
  p.workdir_host = "/host/case/work";
  p.hints = {{"canary_file", "/host/canary"}};
  p.marker = "MARK";
  return p;
}

Words Render(const Profile& profile, const Case& c = CsvCase(),
             const Placement& placement = CsvPlacement()) {
  auto argv = RenderCommand(profile, c, placement);
  EXPECT_TRUE(argv) << argv.error().ToString();
  return argv ? *argv : Words{};
}

// ---------------------------------------------------------------------------
// Loading

TEST(LoadProfile, parses_every_shipped_profile) {
  size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kProfiles)) {
    if (entry.path().extension() != ".json") continue;
    auto text = ReadTextFile(entry.path(), kMaxTestProfileBytes);
    ASSERT_TRUE(text) << entry.path();
    auto profile = ParseProfile(*text, entry.path());
    EXPECT_TRUE(profile) << profile.error().ToString();
    EXPECT_EQ(profile ? profile->name + ".json" : "", entry.path().filename());
    EXPECT_FALSE(profile && profile->description.empty()) << entry.path();
    ++count;
  }
  EXPECT_EQ(count, 12u);
}

TEST(LoadProfile, loads_null_with_host_paths_and_every_limit_unsupported) {
  auto profile = LoadProfile("null", kProfiles);
  ASSERT_TRUE(profile) << profile.error().ToString();
  EXPECT_EQ(profile->name, "null");
  EXPECT_TRUE(profile->host_paths);
  EXPECT_FALSE(profile->smolbox_json);
  EXPECT_EQ(profile->unsupported, kLimitNames);
  Case c = CsvCase();
  EXPECT_EQ(UnsupportedLimits(*profile, c), (Words{"timeout_ms", "cpus", "output_bytes"}));
}

TEST(LoadProfile, loads_each_smolbox_backend_with_its_variables) {
  ScopedEnv smolbox("SMOLBOX", "/bin/true");
  for (const char* backend : {"ns", "auto", "vm"}) {
    auto profile = LoadProfile(std::string("smolbox:") + backend, kProfiles);
    ASSERT_TRUE(profile) << profile.error().ToString();
    EXPECT_EQ(profile->name, std::string("smolbox:") + backend);
    EXPECT_EQ(profile->variables.at("backend"), backend);
    EXPECT_EQ(profile->binary, "/bin/true");
    EXPECT_EQ(profile->version_command, (Words{"/bin/true", "--version"}));
    EXPECT_TRUE(profile->smolbox_json);
    EXPECT_TRUE(profile->unsupported.empty());
  }
}

TEST(LoadProfile, finds_smolbox_next_to_the_running_executable) {
  ScopedEnv smolbox("SMOLBOX", "");
  std::string self = std::filesystem::read_symlink("/proc/self/exe");
  std::string expected = std::filesystem::path(self).parent_path() / "smolbox";
  auto profile = LoadProfile("smolbox:ns", kProfiles);
  if (access(expected.c_str(), X_OK) != 0) {
    ASSERT_FALSE(profile);
    EXPECT_NE(profile.error().ToString().find(expected), std::string::npos);
    return;
  }
  ASSERT_TRUE(profile) << profile.error().ToString();
  EXPECT_EQ(profile->binary, expected);
}

TEST(LoadProfile, rejects_an_unknown_smolbox_backend) {
  auto profile = LoadProfile("smolbox:kvm", kProfiles);
  ASSERT_FALSE(profile);
  EXPECT_EQ(profile.error().ToString(),
            "sandbox smolbox:kvm: unknown smolbox backend \"kvm\" (ns, auto, vm, vm-tcg, vm-fresh, vm-tcg-fresh, api, api-vm-tcg, vm-prewarm or vm-tcg-prewarm)");
}

TEST(LoadProfile, a_fresh_vm_variant_boots_without_the_snapshot) {
  auto fresh = LoadProfile("smolbox:vm-tcg-fresh", kProfiles);
  ASSERT_TRUE(fresh) << fresh.error().ToString();
  EXPECT_TRUE(fresh->fresh_boot);
  EXPECT_EQ(fresh->variables.at("accel"), "tcg");
  EXPECT_EQ(fresh->variables.at("backend"), "vm");
  EXPECT_GT(fresh->startup_allowance_ms, 0);
  auto run = std::find(fresh->command.begin(), fresh->command.end(), "run");
  ASSERT_NE(run, fresh->command.end());
  EXPECT_EQ(*(run + 1), "--no-snapshot");
  auto restored = LoadProfile("smolbox:vm-tcg", kProfiles);
  ASSERT_TRUE(restored);
  EXPECT_FALSE(restored->fresh_boot);
  EXPECT_EQ(std::count(restored->command.begin(), restored->command.end(), "--no-snapshot"), 0);
}

TEST(LoadProfile, a_prewarm_variant_is_for_warm_rows_in_a_sandbox_created_with_prewarm) {
  auto prewarm = LoadProfile("smolbox:vm-tcg-prewarm", kProfiles);
  ASSERT_TRUE(prewarm) << prewarm.error().ToString();
  EXPECT_TRUE(prewarm->warm_only);
  EXPECT_EQ(prewarm->variables.at("prewarm"), "python");
  EXPECT_EQ(prewarm->variables.at("accel"), "tcg");
  auto plain = LoadProfile("smolbox:vm-tcg", kProfiles);
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->warm_only);
  EXPECT_FALSE(plain->variables.contains("prewarm"));
}

TEST(LoadProfile, loads_bwrap_runsc_and_firejail_where_they_are_installed) {
  for (const char* name : {"bwrap", "runsc", "firejail"}) {
    if (!OnPath(name)) {
      ADD_FAILURE() << name << " is not installed (the setup script installs it)";
      continue;
    }
    auto profile = LoadProfile(name, kProfiles);
    ASSERT_TRUE(profile) << profile.error().ToString();
    EXPECT_FALSE(profile->syntax_only);
    EXPECT_EQ(profile->version_command[0], name);
  }
}

TEST(LoadProfile, validates_smolvm_as_syntax_only_without_its_binary) {
  TempDir empty("profile-test");
  ScopedEnv path("PATH", empty.path());
  auto profile = LoadProfile("smolvm", kProfiles);
  ASSERT_TRUE(profile) << profile.error().ToString();
  EXPECT_TRUE(profile->syntax_only);
}

TEST(LoadProfile, names_a_missing_binary_and_how_to_install_it) {
  TempDir empty("profile-test");
  ScopedEnv path("PATH", empty.path());
  auto profile = LoadProfile("bwrap", kProfiles);
  ASSERT_FALSE(profile);
  EXPECT_EQ(profile.error().ToString(),
            "sandbox bwrap: binary \"bwrap\" not found on PATH (apt install bubblewrap)");
  // docker's profile runs the engine it needs, so the engine is what it names.
  auto docker = LoadProfile("docker", kProfiles);
  ASSERT_FALSE(docker);
  EXPECT_EQ(docker.error().ToString(), "sandbox docker: binary \"dockerd\" not found on PATH (apt install docker.io)");
}

TEST(LoadProfile, checks_the_binary_before_the_rest_of_the_profile) {
  TempDir dir("profile-test");
  std::string path =
      dir.Write("ghost.json", R"({"name": "ghost", "binary": "no-such-sandbox-binary",
      "command": ["no-such-sandbox-binary", "{argv...}"], "result": "exit_code"})");
  auto profile = LoadProfile(path, kProfiles);
  ASSERT_FALSE(profile);
  EXPECT_EQ(profile.error().ToString(),
            "sandbox " + path + ": binary \"no-such-sandbox-binary\" not found on PATH");
}

TEST(LoadProfile, loads_a_profile_by_name_from_the_directory_or_by_path) {
  TempDir dir("profile-test");
  std::string path = dir.Write("mine.json", GoodProfile().dump());
  auto by_name = LoadProfile("mine", dir.path());
  ASSERT_TRUE(by_name) << by_name.error().ToString();
  EXPECT_EQ(by_name->name, "x");
  auto by_path = LoadProfile(path, "/nonexistent");
  ASSERT_TRUE(by_path) << by_path.error().ToString();
}

TEST(LoadProfile, names_a_profile_that_does_not_exist) {
  auto profile = LoadProfile("no-such-profile", "/nonexistent");
  ASSERT_FALSE(profile);
  EXPECT_EQ(profile.error().ToString(),
            "sandbox no-such-profile: no such profile (/nonexistent/no-such-profile.json does "
            "not exist)");
}

// ---------------------------------------------------------------------------
// Parsing

TEST(ParseProfile, accepts_the_good_profile_these_tests_break) {
  EXPECT_EQ(ParseError(GoodProfile()), "<parsed>");
}

TEST(ParseProfile, rejects_an_unknown_field) {
  json p = GoodProfile();
  p["name"] = "bwrap";
  p["comand"] = {"x"};
  EXPECT_EQ(ParseError(p), "profile bwrap: unknown field \"comand\"");
  p.erase("comand");
  p["mount"]["rx"] = {"x"};
  EXPECT_EQ(ParseError(p), "profile bwrap: mount: unknown field \"rx\"");
}

TEST(ParseProfile, rejects_a_missing_required_field) {
  for (const char* field : {"command", "result"}) {
    json p = GoodProfile();
    p.erase(field);
    EXPECT_EQ(ParseError(p), fmt::format("profile x: {}: is required", field));
  }
  json p = GoodProfile();
  p.erase("name");
  EXPECT_EQ(ParseError(p), "profile test.json: name: is required");
}

TEST(ParseProfile, rejects_wrong_types_and_values) {
  json p = GoodProfile();
  p["result"] = "json";
  EXPECT_EQ(ParseError(p), "profile x: result: must be exit_code or smolbox_json (got \"json\")");
  p = GoodProfile();
  p["paths"] = "guest";
  EXPECT_EQ(ParseError(p), "profile x: paths: must be sandbox or host (got \"guest\")");
  p = GoodProfile();
  p["syntax_only"] = "yes";
  EXPECT_EQ(ParseError(p), "profile x: syntax_only: must be true or false");
  p = GoodProfile();
  p["command"] = "sbx {argv...}";
  EXPECT_EQ(ParseError(p), "profile x: command: must be an array of strings");
  for (json bad : {json(-1), json(60001), json("5s")}) {
    p = GoodProfile();
    p["startup_allowance_ms"] = bad;
    EXPECT_EQ(ParseError(p), "profile x: startup_allowance_ms: must be a whole number of ms from 0 to 60000") << bad;
  }
}

TEST(ParseProfile, a_booting_sandbox_declares_its_startup_allowance) {
  json p = GoodProfile();
  p["startup_allowance_ms"] = 1500;
  auto parsed = ParseProfile(p.dump(), "test.json");
  ASSERT_TRUE(parsed) << parsed.error().ToString();
  EXPECT_EQ(parsed->startup_allowance_ms, 1500);
  ScopedEnv smolbox("SMOLBOX", "/bin/true");
  EXPECT_EQ(LoadProfile("smolbox:vm-tcg", kProfiles)->startup_allowance_ms, 6000);
  EXPECT_EQ(LoadProfile("smolbox:vm", kProfiles)->startup_allowance_ms, 0);
}

TEST(ParseProfile, names_malformed_json_by_its_origin) {
  auto parsed = ParseProfile("{\"name\": ", "broken.json");
  ASSERT_FALSE(parsed);
  EXPECT_TRUE(parsed.error().ToString().starts_with(
      "profile broken.json: malformed JSON at byte 10: syntax error"))
      << parsed.error().ToString();
}

TEST(ParseProfile, refuses_a_profile_nested_deeper_than_32_levels_naming_it) {
  json p = GoodProfile();
  std::string text = p.dump();
  text.insert(text.size() - 1, R"(, "deep": )" + std::string(100000, '[') + std::string(100000, ']'));
  auto parsed = ParseProfile(text, "deep.json");
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error().ToString(), "profile deep.json: nesting deeper than 32 levels");
}

TEST(ParseProfile, reads_a_profile_exactly_at_the_depth_limit_as_far_as_its_fields) {
  std::string text = GoodProfile().dump();
  text.insert(text.size() - 1, R"(, "deep": )" + std::string(31, '[') + std::string(31, ']'));
  auto parsed = ParseProfile(text, "deep.json");
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error().ToString().find("nesting"), std::string::npos) << parsed.error().ToString();
}

TEST(LoadProfile, refuses_a_profile_file_over_1_MiB_naming_the_file_and_the_limit) {
  TempDir dir("profile-test");
  json p = GoodProfile();
  p["description"] = std::string(1 << 20, 'x');
  std::string path = dir.Write("big.json", p.dump());
  auto loaded = LoadProfile("big", dir.path());
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.error().ToString(), "sandbox big: " + path + " is over the 1 MiB limit");
}

TEST(ParseProfile, rejects_an_unknown_placeholder_naming_the_word) {
  json p = GoodProfile();
  p["command"] = {"sbx",         "{limits...}", "{mounts...}", "--timeout",
                  "{tiemout_s}", "{env...}",    "{argv...}"};
  EXPECT_EQ(ParseError(p), "profile x: command[4]: unknown placeholder {tiemout_s}");
  p = GoodProfile();
  p["env"] = {"--env", "{key}={source}"};
  EXPECT_EQ(ParseError(p), "profile x: env[1]: unknown placeholder {source}");
  p = GoodProfile();
  p["limit_args"]["timeout_ms"] = {"--timeout", "{timeout}"};
  EXPECT_EQ(ParseError(p), "profile x: limit_args.timeout_ms[1]: unknown placeholder {timeout}");
  p = GoodProfile();
  p["mount"]["ro"] = {"{argv...}"};
  EXPECT_EQ(ParseError(p), "profile x: mount.ro[0]: unknown placeholder {argv...}");
}

TEST(ParseProfile, accepts_placeholders_for_declared_variables) {
  json p = GoodProfile();
  p["command"] = {"sbx",         "--image",  "{image}",  "{limits...}",
                  "{mounts...}", "{env...}", "{argv...}"};
  EXPECT_EQ(ParseError(p), "profile x: command[2]: unknown placeholder {image}");
  p["variables"] = {{"image", "node:20"}};
  EXPECT_EQ(ParseError(p), "<parsed>");
  p["variables"] = {{"workdir", "/x"}};
  EXPECT_EQ(ParseError(p), "profile x: variables: \"workdir\" cannot be a variable name");
}

TEST(ParseProfile, requires_multi_word_placeholders_as_whole_words_used_once) {
  json p = GoodProfile();
  p["command"] = {"sbx", "{limits...}", "{mounts...}", "{env...}", "--cmd={argv...}"};
  EXPECT_EQ(ParseError(p), "profile x: command[4]: {argv...} must be a word of its own");
  p["command"] = {"sbx", "{limits...}", "{mounts...}", "{env...}"};
  EXPECT_EQ(ParseError(p), "profile x: command: needs {argv...} exactly once");
  p["command"] = {"sbx", "{limits...}", "{mounts...}", "{env...}", "{env...}", "{argv...}"};
  EXPECT_EQ(ParseError(p), "profile x: command: uses {env...} more than once");
}

TEST(ParseProfile, requires_a_template_for_each_expansion_and_the_reverse) {
  json p = GoodProfile();
  p["stdin"] = {"-i"};
  EXPECT_EQ(ParseError(p), "profile x: stdin: is set but command has no {stdin...}");
  p = GoodProfile();
  p.erase("limit_args");
  p["unsupported"].push_back("timeout_ms");
  EXPECT_EQ(ParseError(p), "profile x: command: uses {limits...} without \"limit_args\"");
}

TEST(ParseProfile, names_a_bad_user_template) {
  json p = GoodProfile();
  p["user"] = {{"admin", {"--uid", "0"}}};
  EXPECT_EQ(ParseError(p), "profile x: user: unknown user \"admin\" (expected one of sandbox, root)");
  p["user"] = {{"root", "--uid 0"}};
  EXPECT_EQ(ParseError(p), "profile x: user.root: must be an array of strings");
  p["user"] = {{"root", {"--uid", "0"}}};
  EXPECT_EQ(ParseError(p), "profile x: user: is set but command has no {user...}");
  p["user"] = {{"root", json::array()}};
  EXPECT_EQ(ParseError(p), "<parsed>");
}

TEST(ParseProfile, reads_an_egress_template_and_names_what_is_wrong_with_one) {
  json p = GoodProfile();
  p["command"] = {"sbx", "{limits...}", "{mounts...}", "{env...}", "{egress...}", "--", "{argv...}"};
  p["egress"] = {{"net", {"--net"}}, {"allow_host", {"--allow-host", "{host}"}}, {"allow_cidr", {"--allow-cidr={cidr}"}}};
  auto parsed = ParseProfile(p.dump(), "test.json");
  ASSERT_TRUE(parsed) << parsed.error().ToString();
  ASSERT_TRUE(parsed->egress.has_value());
  EXPECT_EQ(parsed->egress->allow_cidr, (Words{"--allow-cidr={cidr}"}));
  json broken = p;
  broken["egress"].erase("allow_cidr");
  EXPECT_EQ(ParseError(broken), "profile x: egress.allow_cidr: is required (an empty list says nothing is needed)");
  broken = p;
  broken["egress"]["allow_host"] = {"--allow-host", "{cidr}"};
  EXPECT_EQ(ParseError(broken), "profile x: egress.allow_host[1]: unknown placeholder {cidr}");
  broken = p;
  broken["egress"]["deny_cidr"] = {"--deny-cidr", "{host}"};
  EXPECT_EQ(ParseError(broken), "profile x: egress.deny_cidr[1]: unknown placeholder {host}");
  broken = p;
  broken["egress"]["net_limit"] = {"--net-limit", "{cidr}"};
  EXPECT_EQ(ParseError(broken), "profile x: egress.net_limit[1]: unknown placeholder {cidr}");
  broken = p;
  broken["egress"]["net_limit"] = "--net-limit";
  EXPECT_EQ(ParseError(broken), "profile x: egress.net_limit: must be an array of strings");
  broken = p;
  broken["egress"]["via"] = json::array();
  EXPECT_EQ(ParseError(broken), "profile x: egress: unknown field \"via\"");
  broken = p;
  broken["command"] = GoodProfile()["command"];
  EXPECT_EQ(ParseError(broken), "profile x: egress: is set but command has no {egress...}");
  broken = GoodProfile();
  broken["command"] = p["command"];
  EXPECT_EQ(ParseError(broken), "profile x: command: uses {egress...} without \"egress\"");
  // null's: nothing to say, and no {egress...} to say it at.
  broken = GoodProfile();
  broken["egress"] = {{"net", json::array()}, {"allow_host", json::array()}, {"allow_cidr", json::array()}};
  EXPECT_EQ(ParseError(broken), "<parsed>");
}

TEST(ParseProfile, requires_mounts_and_env_unless_paths_are_the_hosts) {
  json p = GoodProfile();
  p.erase("mount");
  p["command"] = {"sbx", "{limits...}", "{env...}", "{argv...}"};
  EXPECT_EQ(ParseError(p), "profile x: mount: is required unless paths is host");
  p["paths"] = "host";
  EXPECT_EQ(ParseError(p), "<parsed>");
}

TEST(ParseProfile, requires_every_limit_mapped_or_declared_unsupported) {
  json p = GoodProfile();
  p["unsupported"] = {"cpu_ms", "memory_mib", "cpus", "pids", "storage_mib", "output_bytes"};
  EXPECT_EQ(ParseError(p),
            "profile x: unsupported: limit \"files\" is neither mapped nor declared unsupported");
  p["unsupported"].push_back("files");
  p["unsupported"].push_back("timeout_ms");
  EXPECT_EQ(ParseError(p),
            "profile x: unsupported: limit \"timeout_ms\" is both mapped and declared unsupported");
  p = GoodProfile();
  p["unsupported"].push_back("gpus");
  EXPECT_EQ(ParseError(p), "profile x: unsupported[7]: unknown limit \"gpus\"");
  p = GoodProfile();
  p["limits"] = {{"memory", {"x"}}};
  EXPECT_EQ(ParseError(p), "profile x: limits: unknown limit \"memory\"");
}

TEST(ParseProfile, fills_the_default_interpreters_and_keeps_overrides) {
  json p = GoodProfile();
  p["interpreters"] = {{"js", {"/usr/local/bin/node"}}};
  auto parsed = ParseProfile(p.dump(), "test.json");
  ASSERT_TRUE(parsed) << parsed.error().ToString();
  EXPECT_EQ(parsed->interpreters.at("python"), (Words{"/usr/bin/python3", "-u"}));
  EXPECT_EQ(parsed->interpreters.at("js"), (Words{"/usr/local/bin/node"}));
  EXPECT_EQ(parsed->interpreters.at("sh"), (Words{"/bin/sh"}));
  p["interpreters"] = {{"ruby", {"/usr/bin/ruby"}}};
  EXPECT_EQ(ParseError(p), "profile x: interpreters: unknown lang \"ruby\"");
}

// ---------------------------------------------------------------------------
// Rendering

// The rendered words, one space apart: every word in these cases is free of spaces.
std::string Line(const Profile& profile, const Case& c = CsvCase()) {
  return fmt::format("{}", fmt::join(Render(profile, c), " "));
}

TEST(RenderCommand, renders_a_case_for_smolbox_ns_with_only_the_limits_it_sets) {
  ScopedEnv smolbox("SMOLBOX", "/bin/true");
  auto profile = LoadProfile("smolbox:ns", kProfiles);
  ASSERT_TRUE(profile) << profile.error().ToString();
  EXPECT_EQ(Line(*profile),
            "/bin/true run --json --backend ns --accel auto --image host"
            " --cpus 0.5 --output-limit 65536B --timeout 2500ms"
            " --stdin /dev/stdin"
            " -v /cat:/payload:ro -v /host/case/in:/in:ro -v /host/case/out:/out:rw"
            " -e GREETING=hi -e LANG=C -w /work --"
            " /usr/bin/python3 -u /payload/python/csv.py /in/data.csv /work/x /host/canary MARK");
}

TEST(RenderCommand, renders_every_smolbox_limit_flag_in_units_smolbox_accepts) {
  ScopedEnv smolbox("SMOLBOX", "/bin/true");
  auto profile = LoadProfile("smolbox:auto", kProfiles);
  ASSERT_TRUE(profile) << profile.error().ToString();
  Case c = CsvCase();
  c.stdin_data.reset();
  c.mounts.clear();
  c.env.clear();
  c.args.clear();
  c.limits = {{"timeout_ms", 1000}, {"cpu_ms", 500},     {"memory_mib", 64},     {"cpus", 1250},
              {"pids", 10},         {"storage_mib", 16}, {"output_bytes", 4096}, {"files", 64}};
  EXPECT_EQ(Line(*profile, c),
            "/bin/true run --json --backend auto --accel auto --image host"
            " --cpu-time 500ms --cpus 1.25 --files 64 --mem 64M --output-limit 4096B --pids 10"
            " --storage 16M --timeout 1000ms"
            " -v /cat:/payload:ro -w /work -- /usr/bin/python3 -u /payload/python/csv.py MARK");
}

TEST(RenderCommand, runs_smolbox_vm_tcg_as_the_vm_backend_on_emulation) {
  ScopedEnv smolbox("SMOLBOX", "/bin/true");
  auto profile = LoadProfile("smolbox:vm-tcg", kProfiles);
  ASSERT_TRUE(profile) << profile.error().ToString();
  EXPECT_EQ(profile->name, "smolbox:vm-tcg");
  EXPECT_TRUE(Line(*profile).starts_with("/bin/true run --json --backend vm --accel tcg --image host ")) << Line(*profile);
}

TEST(LoadProfile, an_at_image_runs_the_cases_in_an_image_from_the_store) {
  ScopedEnv smolbox("SMOLBOX", "/bin/true");
  auto profile = LoadProfile("smolbox:ns@test/py:1", kProfiles);
  ASSERT_TRUE(profile) << profile.error().ToString();
  EXPECT_EQ(profile->name, "smolbox:ns@test/py:1");
  EXPECT_EQ(profile->variables.at("backend"), "ns");
  EXPECT_NE(Line(*profile).find(" --image test/py:1 "), std::string::npos) << Line(*profile);
  auto host = LoadProfile("smolbox:ns", kProfiles);
  ASSERT_TRUE(host);
  EXPECT_NE(Line(*host).find(" --image host "), std::string::npos) << Line(*host);
  auto empty = LoadProfile("smolbox:ns@", kProfiles);
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().ToString(), "sandbox smolbox:ns@: names no image after @ (smolbox:ns@NAME[:TAG])");
}

TEST(LoadProfile, var_sets_a_declared_variable_and_refuses_an_undeclared_one) {
  ScopedEnv smolbox("SMOLBOX", "/bin/true");
  auto smolvm = LoadProfile("smolvm", kProfiles, {{"image", "python:3.11-slim"}});
  ASSERT_TRUE(smolvm) << smolvm.error().ToString();
  EXPECT_EQ(smolvm->variables.at("image"), "python:3.11-slim");
  auto image = LoadProfile("smolbox:ns", kProfiles, {{"image", "app:1"}});
  ASSERT_TRUE(image) << image.error().ToString();
  EXPECT_NE(Line(*image).find(" --image app:1 "), std::string::npos) << Line(*image);
  auto unknown = LoadProfile("smolbox:ns", kProfiles, {{"imgae", "app:1"}});
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().ToString().find("--var imgae: the profile has no variable {imgae} (it has: accel, backend, image, profile_dir, smolbox)"),
            std::string::npos)
      << unknown.error().ToString();
}

Case EgressCase() {
  Case c = CsvCase();
  c.stdin_data.reset();
  c.mounts.clear();
  c.env.clear();
  c.args.clear();
  c.limits.clear();
  c.category = "egress";
  c.egress = CaseEgress{true, {"api.allowed.test:80", "*.allowed.test"}, {"192.0.2.10/32"}, {}, {}};
  return c;
}

Case DenyAndLimitCase() {
  Case c = EgressCase();
  c.egress = CaseEgress{false, {}, {"192.0.2.0/24"}, {"192.0.2.20/32", "192.0.2.30/32"}, 2048};
  return c;
}

TEST(RenderCommand, renders_an_egress_policy_as_smolbox_flags) {
  ScopedEnv smolbox("SMOLBOX", "/bin/true");
  auto profile = LoadProfile("smolbox:ns", kProfiles);
  ASSERT_TRUE(profile) << profile.error().ToString();
  EXPECT_EQ(Line(*profile, EgressCase()),
            "/bin/true run --json --backend ns --accel auto --image host -v /cat:/payload:ro"
            " --net --allow-host api.allowed.test:80 --allow-host *.allowed.test"
            " --allow-cidr 192.0.2.10/32 -w /work -- /usr/bin/python3 -u /payload/python/csv.py MARK");
  EXPECT_EQ(CannotExpressEgress(*profile, EgressCase()), std::nullopt);
  EXPECT_EQ(Line(*profile, DenyAndLimitCase()),
            "/bin/true run --json --backend ns --accel auto --image host -v /cat:/payload:ro"
            " --allow-cidr 192.0.2.0/24 --deny-cidr 192.0.2.20/32 --deny-cidr 192.0.2.30/32"
            " --net-limit 2048B -w /work -- /usr/bin/python3 -u /payload/python/csv.py MARK");
  EXPECT_EQ(CannotExpressEgress(*profile, DenyAndLimitCase()), std::nullopt);
  // A case without a policy gets no egress flag: no network.
  EXPECT_EQ(Line(*profile).find("--net"), std::string::npos);
  EXPECT_EQ(Line(*profile).find("--allow"), std::string::npos);
}

// A case that trusts the test CA: smolbox takes its PEM file by --ca-bundle, null by the
// variables clients read, and a profile with no words for it skips the case.
TEST(RenderCommand, a_case_that_trusts_the_test_ca_gets_its_file_or_skips) {
  ScopedEnv smolbox("SMOLBOX", "/bin/true");
  Case trusting = EgressCase();
  trusting.egress = CaseEgress{false, {"api.allowed.test"}, {}, {}, {}, true};
  Placement placement = CsvPlacement();
  placement.test_ca_path = "/inet/ca.pem";
  auto profile = LoadProfile("smolbox:ns", kProfiles);
  ASSERT_TRUE(profile) << profile.error().ToString();
  EXPECT_EQ(fmt::format("{}", fmt::join(Render(*profile, trusting, placement), " ")),
            "/bin/true run --json --backend ns --accel auto --image host -v /cat:/payload:ro"
            " --allow-host api.allowed.test --ca-bundle /inet/ca.pem -w /work --"
            " /usr/bin/python3 -u /payload/python/csv.py MARK");
  EXPECT_EQ(Line(*profile, EgressCase()).find("--ca-bundle"), std::string::npos);
  auto null = LoadProfile("null", kProfiles);
  ASSERT_TRUE(null) << null.error().ToString();
  EXPECT_EQ(CannotExpressEgress(*null, trusting), std::nullopt);
  EXPECT_EQ(Render(*null, trusting, placement),
            (Words{"/usr/bin/env", "SSL_CERT_FILE=/inet/ca.pem", "NODE_EXTRA_CA_CERTS=/inet/ca.pem", "/usr/bin/python3",
                   "-u", "/cat/python/csv.py", "MARK"}));
  auto smolvm = LoadProfile("smolvm", kProfiles);
  ASSERT_TRUE(smolvm) << smolvm.error().ToString();
  EXPECT_EQ(CannotExpressEgress(*smolvm, trusting),
            "profile smolvm cannot express egress.trust_test_ca (its \"egress\" field has no words for it)");
}

TEST(RenderCommand, skips_egress_where_a_profile_cannot_express_it_and_runs_it_open_on_null) {
  auto null = LoadProfile("null", kProfiles);
  ASSERT_TRUE(null) << null.error().ToString();
  EXPECT_EQ(CannotExpressEgress(*null, EgressCase()), std::nullopt);
  EXPECT_EQ(Render(*null, EgressCase()), (Words{"/usr/bin/env", "/usr/bin/python3", "-u", "/cat/python/csv.py", "MARK"}));
  json p = GoodProfile();
  auto bare = ParseProfile(p.dump(), "test.json");
  ASSERT_TRUE(bare) << bare.error().ToString();
  EXPECT_EQ(CannotExpressEgress(*bare, EgressCase()),
            "profile x cannot express an egress policy (it has no \"egress\" field)");
  EXPECT_EQ(CannotExpressEgress(*bare, CsvCase()), std::nullopt);
  p["command"] = {"sbx", "{limits...}", "{mounts...}", "{env...}", "{egress...}", "--", "{argv...}"};
  p["egress"] = {{"net", {"--net"}}, {"allow_host", {"--allow-host", "{host}"}}, {"allow_cidr", json::array()}};
  auto partial = ParseProfile(p.dump(), "test.json");
  ASSERT_TRUE(partial) << partial.error().ToString();
  EXPECT_EQ(CannotExpressEgress(*partial, EgressCase()),
            "profile x cannot express egress.allow_cidr (its \"egress\" field has no words for it)");
  Case names_only = EgressCase();
  names_only.egress->allow_cidr.clear();
  EXPECT_EQ(CannotExpressEgress(*partial, names_only), std::nullopt);
  // A deny rule or a byte cap the profile has no words for is never dropped: the case skips.
  p["egress"]["allow_cidr"] = {"--allow-cidr", "{cidr}"};
  p["egress"]["deny_cidr"] = {"--deny-cidr", "{cidr}"};
  auto no_limit = ParseProfile(p.dump(), "test.json");
  ASSERT_TRUE(no_limit) << no_limit.error().ToString();
  EXPECT_EQ(CannotExpressEgress(*no_limit, DenyAndLimitCase()),
            "profile x cannot express egress.net_limit (its \"egress\" field has no words for it)");
  p["egress"].erase("deny_cidr");
  auto no_deny = ParseProfile(p.dump(), "test.json");
  ASSERT_TRUE(no_deny) << no_deny.error().ToString();
  EXPECT_EQ(CannotExpressEgress(*no_deny, DenyAndLimitCase()),
            "profile x cannot express egress.deny_cidr (its \"egress\" field has no words for it)");
  // null says nothing at all: it runs the case open, and so fails it.
  EXPECT_EQ(CannotExpressEgress(*null, DenyAndLimitCase()), std::nullopt);
}

TEST(RenderCommand, renders_a_case_for_null_on_host_paths) {
  auto profile = LoadProfile("null", kProfiles);
  ASSERT_TRUE(profile) << profile.error().ToString();
  EXPECT_EQ(Render(*profile),
            (Words{"/usr/bin/env", "/usr/bin/python3", "-u", "/cat/python/csv.py", "/host/case/in/data.csv",
                   "/host/case/work/x", "/host/canary", "MARK"}));
}

TEST(RenderCommand, renders_a_case_for_bwrap_behind_its_limit_wrappers) {
  auto text = ReadTextFile(kProfiles + "/bwrap.json", kMaxTestProfileBytes);
  ASSERT_TRUE(text);
  auto profile = ParseProfile(*text, "bwrap.json");
  ASSERT_TRUE(profile) << profile.error().ToString();
  EXPECT_EQ(Line(*profile),
            "prlimit --nofile=256 -- timeout --kill-after=2 3"
            " bwrap --unshare-all --unshare-user --uid 65534 --gid 65534 --cap-drop ALL"
            " --die-with-parent --new-session --clearenv --setenv PATH /usr/bin:/bin"
            " --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/sbin /sbin"
            " --symlink usr/lib /lib --symlink usr/lib64 /lib64"
            " --proc /proc --dev /dev --tmpfs /tmp --dir /work"
            " --ro-bind /cat /payload --ro-bind /host/case/in /in --bind /host/case/out /out"
            " --setenv GREETING hi --setenv LANG C --chdir /work --"
            " /usr/bin/python3 -u /payload/python/csv.py /in/data.csv /work/x /host/canary MARK");
  EXPECT_EQ(UnsupportedLimits(*profile, CsvCase()), (Words{"cpus", "output_bytes"}));
}

TEST(RenderCommand, runs_a_root_case_as_root_inside_each_sandbox_that_can_and_skips_it_elsewhere) {
  Case root = CsvCase();
  root.user = "root";
  auto text = ReadTextFile(kProfiles + "/bwrap.json", kMaxTestProfileBytes);
  ASSERT_TRUE(text);
  auto profile = ParseProfile(*text, "bwrap.json");
  ASSERT_TRUE(profile) << profile.error().ToString();
  EXPECT_NE(Line(*profile, root).find(" --unshare-user --uid 0 --gid 0 --cap-drop ALL "), std::string::npos)
      << Line(*profile, root);
  EXPECT_TRUE(RunsAsCaseUser(*profile, root));
  auto smolbox = LoadProfile("smolbox:ns", kProfiles);
  ASSERT_TRUE(smolbox) << smolbox.error().ToString();
  EXPECT_NE(Line(*smolbox, root).find(" --user root -w /work "), std::string::npos) << Line(*smolbox, root);
  EXPECT_EQ(Line(*smolbox).find("--user"), std::string::npos) << Line(*smolbox);
  auto null = LoadProfile("null", kProfiles);
  ASSERT_TRUE(null) << null.error().ToString();
  EXPECT_TRUE(RunsAsCaseUser(*null, root));
  auto runsc = ParseProfile(ReadTextFile(kProfiles + "/runsc.json", kMaxTestProfileBytes).value_or(""), "runsc.json");
  ASSERT_TRUE(runsc) << runsc.error().ToString();
  EXPECT_FALSE(RunsAsCaseUser(*runsc, root));
  EXPECT_TRUE(RunsAsCaseUser(*runsc, CsvCase()));
}

TEST(RenderCommand, renders_runsc_with_a_cleared_environment_on_host_paths) {
  auto text = ReadTextFile(kProfiles + "/runsc.json", kMaxTestProfileBytes);
  ASSERT_TRUE(text);
  auto profile = ParseProfile(*text, "runsc.json");
  ASSERT_TRUE(profile) << profile.error().ToString();
  Case c = CsvCase();
  c.lang = "js";
  EXPECT_EQ(Line(*profile, c),
            "timeout --kill-after=2 3 env -i PATH=/usr/bin:/bin GREETING=hi LANG=C"
            " runsc --network=none do -quiet -cwd /host/case/work --"
            " /usr/bin/node /cat/python/csv.py /host/case/in/data.csv /host/case/work/x"
            " /host/canary MARK");
}

// On host paths the payload directory is a mount too, at its own path: firejail's private /tmp
// hides whatever its mount words do not show.
TEST(RenderCommand, renders_firejail_showing_the_payload_directory_and_the_mounts_at_their_host_paths) {
  auto text = ReadTextFile(kProfiles + "/firejail.json", kMaxTestProfileBytes);
  ASSERT_TRUE(text);
  auto profile = ParseProfile(*text, "firejail.json");
  ASSERT_TRUE(profile) << profile.error().ToString();
  EXPECT_EQ(Line(*profile),
            "timeout --kill-after=2 3 env -i PATH=/usr/bin:/bin GREETING=hi LANG=C"
            " firejail --noprofile --quiet --net=none --caps.drop=all --nonewprivs --seccomp"
            " --private-dev --private --machine-id --hostname=sandbox --ipc-namespace --nogroups"
            " --whitelist=/host/case/work --private-cwd=/host/case/work"
            " --whitelist=/cat --read-only=/cat --whitelist=/host/case/in --read-only=/host/case/in"
            " --whitelist=/host/case/out --"
            " /usr/bin/python3 -u /cat/python/csv.py /host/case/in/data.csv /host/case/work/x"
            " /host/canary MARK");
}

TEST(RenderCommand, renders_docker_and_smolvm_with_their_image_and_interpreters) {
  Case c = CsvCase();
  c.lang = "js";
  c.limits["memory_mib"] = 256;
  for (const char* name : {"docker", "smolvm"}) {
    auto text = ReadTextFile(kProfiles + "/" + name + ".json", kMaxTestProfileBytes);
    ASSERT_TRUE(text);
    auto profile = ParseProfile(*text, kProfiles + "/" + name + ".json");
    ASSERT_TRUE(profile) << profile.error().ToString();
    Words argv = Render(*profile, c);
    std::string line = fmt::format("{}", fmt::join(argv, " "));
    std::string tail = std::string(name) == "docker" ? "smolvm-check/py:peer /usr/bin/node" : "-- /usr/local/bin/node";
    EXPECT_NE(line.find(tail + " /payload/python/csv.py"), std::string::npos) << line;
    EXPECT_NE(line.find(" -i "), std::string::npos) << line;
    if (std::string(name) == "docker") {
      EXPECT_NE(line.find("--memory 256m --memory-swap 256m"), std::string::npos) << line;
      EXPECT_NE(line.find("--cpus 0.5"), std::string::npos) << line;
      EXPECT_NE(line.find("--user 65534:65534 --tmpfs /work:rw,exec,size=128m,uid=65534,gid=65534"), std::string::npos)
          << line;
      EXPECT_TRUE(line.starts_with(kProfiles + "/docker-peer run /run/smolvm-check-docker 2500 ")) << line;
    } else {
      EXPECT_NE(line.find("--image node:20-bookworm"), std::string::npos) << line;
      EXPECT_NE(line.find("--cpus 1 --mem 256"), std::string::npos) << line;
      EXPECT_NE(line.find("--timeout 3s"), std::string::npos) << line;
      EXPECT_NE(line.find("-v /host/case/out:/out "), std::string::npos) << line;
    }
  }
}

TEST(RenderCommand, leaves_out_stdin_flags_when_the_case_has_no_stdin) {
  ScopedEnv smolbox("SMOLBOX", "/bin/true");
  auto profile = LoadProfile("smolbox:ns", kProfiles);
  ASSERT_TRUE(profile) << profile.error().ToString();
  Case c = CsvCase();
  c.stdin_data.reset();
  Words argv = Render(*profile, c);
  EXPECT_EQ(std::find(argv.begin(), argv.end(), "--stdin"), argv.end());
}

TEST(RenderCommand, names_the_case_of_an_unknown_placeholder_in_its_args) {
  auto profile = LoadProfile("null", kProfiles);
  ASSERT_TRUE(profile) << profile.error().ToString();
  Case c = CsvCase();
  c.args = {"ok", "{canary_flie}"};
  auto argv = RenderCommand(*profile, c, CsvPlacement());
  ASSERT_FALSE(argv);
  EXPECT_EQ(argv.error().ToString(),
            "case \"functional.csv.python\" under profile null: args[1]: unknown placeholder "
            "{canary_flie}");
}

TEST(RenderCommand, rejects_a_payload_outside_the_payload_directory) {
  ScopedEnv smolbox("SMOLBOX", "/bin/true");
  auto profile = LoadProfile("smolbox:ns", kProfiles);
  ASSERT_TRUE(profile) << profile.error().ToString();
  Placement placement = CsvPlacement();
  placement.payload_dir = "/elsewhere";
  auto argv = RenderCommand(*profile, CsvCase(), placement);
  ASSERT_FALSE(argv);
  EXPECT_EQ(argv.error().ToString(),
            "case \"functional.csv.python\" under profile smolbox:ns: payload: "
            "/cat/python/csv.py is not under the payload directory /elsewhere");
}

// ---------------------------------------------------------------------------
// The peers' profiles really run: a sh payload sees its args, env, workdir and mounts.

class PeerRuns : public ::testing::TestWithParam<const char*> {};

TEST_P(PeerRuns, a_sh_payload_with_its_args_env_workdir_and_mounts) {
  if (!OnPath(GetParam())) GTEST_SKIP() << GetParam() << " is not installed";
  auto profile = LoadProfile(GetParam(), kProfiles);
  ASSERT_TRUE(profile) << profile.error().ToString();
  TempDir dir("profile-test");
  dir.Write(
      "payloads/sh/hello.sh",
      "echo \"hello $1 $GREETING $(pwd)\"; cat \"$2/in.txt\"; echo written > \"$3/out.txt\"\n");
  dir.Write("in/in.txt", "from the host\n");
  std::filesystem::create_directories(dir.path() + "/out");
  std::filesystem::create_directories(dir.path() + "/work");
  Case c;
  c.id = "functional.hello.sh";
  c.lang = "sh";
  c.payload = dir.path() + "/payloads/sh/hello.sh";
  c.args = {"world", "{mount:in}", "{mount:out}"};
  c.env = {{"GREETING", "hi"}};
  c.limits = {{"timeout_ms", 20000}};
  c.mounts = {{"in", "/in", true, {}}, {"out", "/out", false, {}}};
  Placement placement;
  placement.mount_sources = {{"in", dir.path() + "/in"}, {"out", dir.path() + "/out"}};
  placement.payload_dir = dir.path() + "/payloads";
  placement.workdir_host = dir.path() + "/work";
  auto argv = RenderCommand(*profile, c, placement);
  ASSERT_TRUE(argv) << argv.error().ToString();
  ProgramRun ran = RunProgram(*argv);
  EXPECT_EQ(ran.exit_code, 0) << ran.out << ran.err;
  std::string workdir = profile->host_paths ? placement.workdir_host : kSandboxWorkdir;
  EXPECT_EQ(ran.out, "hello world hi " + workdir + "\nfrom the host\n");
  // runsc do writes into an in-memory overlay: nothing comes back to the host.
  bool overlay = std::string(GetParam()) == "runsc";
  EXPECT_EQ(std::filesystem::exists(dir.path() + "/out/out.txt"), !overlay);
}

INSTANTIATE_TEST_SUITE_P(Installed, PeerRuns, ::testing::Values("bwrap", "runsc", "firejail"));

TEST(SmolboxRuns, with_every_limit_flag_the_profile_renders) {
  std::string smolbox = std::string(SMOLBOX_BIN_DIR) + "/smolbox";
  if (access(smolbox.c_str(), X_OK) != 0) GTEST_SKIP() << smolbox << " is not built";
  ScopedEnv env("SMOLBOX", smolbox);
  auto profile = LoadProfile("smolbox:ns", kProfiles);
  ASSERT_TRUE(profile) << profile.error().ToString();
  TempDir dir("profile-test");
  dir.Write("payloads/sh/hello.sh", "echo \"hello $1 $GREETING $(pwd)\"; cat \"$2/in.txt\"\n");
  dir.Write("in/in.txt", "from the host\n");
  Case c;
  c.id = "functional.hello.sh";
  c.lang = "sh";
  c.payload = dir.path() + "/payloads/sh/hello.sh";
  c.args = {"world", "{mount:in}"};
  c.env = {{"GREETING", "hi"}};
  c.limits = {{"timeout_ms", 20000}, {"cpu_ms", 10000},   {"memory_mib", 64},      {"cpus", 500},
              {"pids", 16},          {"storage_mib", 16}, {"output_bytes", 65536}, {"files", 64}};
  c.mounts = {{"in", "/in", true, {}}};
  Placement placement;
  placement.mount_sources = {{"in", dir.path() + "/in"}};
  placement.payload_dir = dir.path() + "/payloads";
  auto argv = RenderCommand(*profile, c, placement);
  ASSERT_TRUE(argv) << argv.error().ToString();
  ProgramRun ran = RunProgram(*argv);
  auto result = json::parse(ran.out, nullptr, false);
  ASSERT_TRUE(result.is_object()) << ran.out;
  EXPECT_EQ(result["status"], "exited") << ran.out;
  EXPECT_EQ(result["stdout"], "hello world hi /work\nfrom the host\n") << ran.out;
}

}  // namespace
}  // namespace smolvm_check
