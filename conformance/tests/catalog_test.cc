// LoadCatalog: a good catalog loads with its defaults; every bad entry is an error naming the
// case and the field.
#include "battery/catalog.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>
#include <string>

#include "test_support.h"

namespace smolvm_check {
namespace {

using nlohmann::json;

// A catalog directory of its own, with a payload or two, removed afterwards.
class CatalogDir {
 public:
  CatalogDir() {
    dir_.Write("python/loop.py", "while True: pass\n");
    dir_.Write("python/hello.py", "print('hello')\n");
  }

  std::string Write(const std::string& text) const { return dir_.Write("catalog.json", text); }
  std::string WriteCases(const json& cases) const {
    return Write(json{{"version", 1}, {"cases", cases}}.dump());
  }
  const std::string& dir() const { return dir_.path(); }

 private:
  smolbox::testing::TempDir dir_{"catalog-test"};
};

json MinimalCase() {
  return {{"id", "cpu.loop.python"},
          {"category", "cpu"},
          {"kind", "adversarial"},
          {"lang", "python"},
          {"payload", "python/loop.py"}};
}

// The error LoadCatalog gives for a catalog holding this one case.
std::string ErrorFor(const json& c) {
  CatalogDir dir;
  auto catalog = LoadCatalog(dir.WriteCases(json::array({c})));
  return catalog ? "<loaded>" : catalog.error().ToString();
}

json With(json c, const json::json_pointer& pointer, json value) {
  c[pointer] = std::move(value);
  return c;
}

// ---------------------------------------------------------------------------
// Good catalogs

TEST(LoadCatalog, loads_a_minimal_case_with_its_defaults) {
  CatalogDir dir;
  auto catalog = LoadCatalog(dir.WriteCases(json::array({MinimalCase()})));
  ASSERT_TRUE(catalog) << catalog.error().ToString();
  EXPECT_EQ(catalog->directory, dir.dir());
  ASSERT_EQ(catalog->cases.size(), 1u);
  const Case& c = catalog->cases[0];
  EXPECT_EQ(c.id, "cpu.loop.python");
  EXPECT_EQ(c.Kind(), "adversarial");
  EXPECT_EQ(c.payload, dir.dir() + "/python/loop.py");
  EXPECT_EQ(c.oracles, (std::vector<std::string>{"canaries", "leftovers", "writes"}));
  EXPECT_TRUE(c.HasOracle("leftovers"));
  EXPECT_FALSE(c.HasOracle("sigurg"));
  EXPECT_TRUE(c.limits.empty());
  EXPECT_FALSE(c.stdin_data.has_value());
}

TEST(LoadCatalog, gives_the_runspec_default_for_every_limit_a_case_does_not_set) {
  Case c;
  EXPECT_EQ(c.Limit("timeout_ms"), 30000);
  EXPECT_EQ(c.Limit("cpu_ms"), 0);
  EXPECT_EQ(c.Limit("memory_mib"), 512);
  EXPECT_EQ(c.Limit("cpus"), 1000);
  EXPECT_EQ(c.Limit("pids"), 64);
  EXPECT_EQ(c.Limit("storage_mib"), 128);
  EXPECT_EQ(c.Limit("output_bytes"), 1048576);
  EXPECT_EQ(c.Limit("files"), 256);
  c.limits["pids"] = 8;
  EXPECT_EQ(c.Limit("pids"), 8);
}

TEST(LoadCatalog, reads_every_field) {
  json c = MinimalCase();
  c["id"] = "functional.csv.python";
  c["category"] = "functional";
  c["kind"] = "functional";
  c["description"] = "csv to json";
  c["args"] = {"{mount:in}/data.csv", "{mount:out}/result.json", "{canary_file}"};
  c["stdin"] = "text";
  c["env"] = {{"GREETING", "hi"}};
  c["limits"] = {{"timeout_ms", 2000}, {"cpus", 0.5}, {"memory_mib", 64}};
  c["mounts"] = {
      {{"name", "in"},
       {"mode", "ro"},
       {"target", "/in"},
       {"files", {{"data.csv", "a,b\n"}}},
       {"path_canary", true}},
      {{"name", "out"}, {"mode", "rw"}, {"target", "/out"}}};
  c["expect"] = {{"status", {"exited"}},
                 {"max_wall_ms", 6000},
                 {"stdout_contains", {"done"}},
                 {"forbid", {"BREACH"}},
                 {"max_count", {{"pattern", "SPAWNED (\\d+)"}, {"max", 40}}},
                 {"outputs", {{"out/result.json", "[]"}}}};
  c["oracles"] = {"canaries", "sigurg"};
  CatalogDir dir;
  auto catalog = LoadCatalog(dir.WriteCases(json::array({c})));
  ASSERT_TRUE(catalog) << catalog.error().ToString();
  const Case& got = catalog->cases[0];
  EXPECT_FALSE(got.adversarial);
  EXPECT_EQ(got.description, "csv to json");
  EXPECT_EQ(got.args.size(), 3u);
  EXPECT_EQ(got.stdin_data, "text");
  EXPECT_EQ(got.env.at("GREETING"), "hi");
  EXPECT_EQ(got.limits.at("timeout_ms"), 2000);
  EXPECT_EQ(got.limits.at("cpus"), 500);
  ASSERT_EQ(got.mounts.size(), 2u);
  EXPECT_TRUE(got.mounts[0].read_only);
  EXPECT_EQ(got.mounts[0].files.at("data.csv"), "a,b\n");
  EXPECT_TRUE(got.mounts[0].path_canary);
  EXPECT_FALSE(got.mounts[1].read_only);
  EXPECT_EQ(got.mounts[1].target, "/out");
  EXPECT_FALSE(got.mounts[1].path_canary);
  EXPECT_EQ(got.expect.status, (std::vector<std::string>{"exited"}));
  EXPECT_EQ(got.expect.max_wall_ms, 6000);
  ASSERT_TRUE(got.expect.max_count.has_value());
  EXPECT_EQ(got.expect.max_count->max, 40);
  EXPECT_EQ(got.expect.outputs.at("out/result.json"), "[]");
  EXPECT_EQ(got.oracles, (std::vector<std::string>{"canaries", "sigurg"}));
}

TEST(LoadCatalog, stores_fractional_cpus_as_milli_cpus) {
  CatalogDir dir;
  json c = With(MinimalCase(), "/limits"_json_pointer, {{"cpus", 0.25}});
  auto catalog = LoadCatalog(dir.WriteCases(json::array({c})));
  ASSERT_TRUE(catalog) << catalog.error().ToString();
  EXPECT_EQ(catalog->cases[0].limits.at("cpus"), 250);
}

TEST(LoadCatalog, accepts_an_empty_oracle_list) {
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/oracles"_json_pointer, json::array())), "<loaded>");
}

// ---------------------------------------------------------------------------
// The file and its top level

TEST(LoadCatalog, names_the_byte_of_malformed_json) {
  CatalogDir dir;
  std::string path = dir.Write(R"({"version": 1, "cases": [}")");
  auto catalog = LoadCatalog(path);
  ASSERT_FALSE(catalog);
  EXPECT_TRUE(catalog.error().ToString().starts_with("catalog " + path +
                                                     ": malformed JSON at byte 26: syntax error"))
      << catalog.error().ToString();
}

TEST(LoadCatalog, refuses_a_catalog_nested_deeper_than_32_levels_naming_the_file) {
  CatalogDir dir;
  std::string path = dir.Write(R"({"version": 1, "cases": )" + std::string(100000, '[') +
                               std::string(100000, ']') + "}");
  auto catalog = LoadCatalog(path);
  ASSERT_FALSE(catalog);
  EXPECT_EQ(catalog.error().ToString(), "catalog " + path + ": nesting deeper than 32 levels");
}

TEST(LoadCatalog, refuses_a_file_over_4_MiB_naming_the_limit) {
  CatalogDir dir;
  std::string path = dir.Write(R"({"version": 1, "cases": [], "pad": ")" +
                               std::string(4 << 20, ' ') + "\"}");
  auto catalog = LoadCatalog(path);
  ASSERT_FALSE(catalog);
  EXPECT_EQ(catalog.error().ToString(),
            "catalog " + path + ": " + path + " is over the 4 MiB limit");
}

TEST(LoadCatalog, names_a_file_it_cannot_open) {
  auto catalog = LoadCatalog("/nonexistent/catalog.json");
  ASSERT_FALSE(catalog);
  EXPECT_EQ(catalog.error().ToString(),
            "catalog /nonexistent/catalog.json: cannot open /nonexistent/catalog.json "
            "(No such file or directory)");
}

TEST(LoadCatalog, rejects_an_unknown_top_level_field) {
  CatalogDir dir;
  std::string path = dir.Write(R"({"version": 1, "cases": [], "extra": true})");
  auto catalog = LoadCatalog(path);
  ASSERT_FALSE(catalog);
  EXPECT_EQ(catalog.error().ToString(), "catalog " + path + ": unknown field \"extra\"");
}

TEST(LoadCatalog, rejects_another_version) {
  CatalogDir dir;
  std::string path = dir.Write(R"({"version": 2, "cases": []})");
  auto catalog = LoadCatalog(path);
  ASSERT_FALSE(catalog);
  EXPECT_EQ(catalog.error().ToString(), "catalog " + path + ": version: must be 1");
}

TEST(LoadCatalog, rejects_duplicate_ids) {
  CatalogDir dir;
  auto catalog = LoadCatalog(dir.WriteCases(json::array({MinimalCase(), MinimalCase()})));
  ASSERT_FALSE(catalog);
  EXPECT_EQ(catalog.error().ToString(),
            "catalog: case \"cpu.loop.python\": id: duplicate id (cases[1] repeats it)");
}

TEST(LoadCatalog, names_a_case_without_an_id_by_its_index) {
  json c = MinimalCase();
  c.erase("id");
  EXPECT_EQ(ErrorFor(c), "catalog: cases[0]: id: is required");
}

TEST(LoadCatalog, rejects_an_id_outside_its_alphabet) {
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/id"_json_pointer, "Cpu Loop")),
            "catalog: cases[0]: id: \"Cpu Loop\" must match [a-z0-9_.]+");
}

// ---------------------------------------------------------------------------
// Fields of a case

TEST(LoadCatalog, rejects_unknown_fields_at_every_level) {
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/tiemout"_json_pointer, 1)),
            "catalog: case \"cpu.loop.python\": unknown field \"tiemout\"");
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/expect"_json_pointer, {{"stauts", {"timeout"}}})),
            "catalog: case \"cpu.loop.python\": expect: unknown field \"stauts\"");
  json mount = {{"name", "in"}, {"target", "/in"}, {"size", 1}};
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/mounts"_json_pointer, {mount})),
            "catalog: case \"cpu.loop.python\": mounts[0]: unknown field \"size\"");
  json max_count = {{"pattern", "N (\\d+)"}, {"max", 1}, {"min", 0}};
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/expect"_json_pointer, {{"max_count", max_count}})),
            "catalog: case \"cpu.loop.python\": expect.max_count: unknown field \"min\"");
}

TEST(LoadCatalog, rejects_wrong_types_naming_the_field) {
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/category"_json_pointer, 3)),
            "catalog: case \"cpu.loop.python\": category: must be a string");
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/limits"_json_pointer, {{"timeout_ms", "2s"}})),
            "catalog: case \"cpu.loop.python\": limits.timeout_ms: must be an integer");
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/args"_json_pointer, {"a", 2})),
            "catalog: case \"cpu.loop.python\": args[1]: must be a string");
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/env"_json_pointer, {{"K", 1}})),
            "catalog: case \"cpu.loop.python\": env.K: must be a string");
}

TEST(LoadCatalog, rejects_a_missing_required_field) {
  json c = MinimalCase();
  c.erase("lang");
  EXPECT_EQ(ErrorFor(c), "catalog: case \"cpu.loop.python\": lang: is required");
}

TEST(LoadCatalog, rejects_an_unknown_category_kind_or_lang) {
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/category"_json_pointer, "gpu")),
            "catalog: case \"cpu.loop.python\": category: unknown category \"gpu\" (expected one "
            "of cpu, memory, pids, disk, output, network, filesystem, privilege, info, signals, "
            "time, functional, egress)");
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/kind"_json_pointer, "hostile")),
            "catalog: case \"cpu.loop.python\": kind: unknown kind \"hostile\" (expected one of "
            "adversarial, functional)");
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/lang"_json_pointer, "ruby")),
            "catalog: case \"cpu.loop.python\": lang: unknown lang \"ruby\" (expected one of "
            "python, js, sh)");
}

TEST(LoadCatalog, runs_a_case_as_the_sandbox_user_unless_it_asks_for_root) {
  CatalogDir dir;
  auto catalog = LoadCatalog(dir.WriteCases(
      json::array({MinimalCase(), With(With(MinimalCase(), "/id"_json_pointer, "cpu.loop_root.python"),
                                       "/user"_json_pointer, "root")})));
  ASSERT_TRUE(catalog) << catalog.error().ToString();
  EXPECT_EQ(catalog->cases[0].user, "sandbox");
  EXPECT_EQ(catalog->cases[1].user, "root");
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/user"_json_pointer, "admin")),
            "catalog: case \"cpu.loop.python\": user: unknown user \"admin\" (expected one of "
            "sandbox, root)");
}

TEST(LoadCatalog, rejects_an_unknown_status) {
  json expect = {{"status", {"timeout", "timout"}}};
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/expect"_json_pointer, expect)),
            "catalog: case \"cpu.loop.python\": expect.status[1]: unknown status \"timout\"");
}

TEST(LoadCatalog, rejects_an_unknown_limit) {
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/limits"_json_pointer, {{"memory_mb", 64}})),
            "catalog: case \"cpu.loop.python\": limits: unknown limit \"memory_mb\"");
}

TEST(LoadCatalog, rejects_a_limit_that_is_not_positive) {
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/limits"_json_pointer, {{"pids", 0}})),
            "catalog: case \"cpu.loop.python\": limits.pids: must be positive");
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/limits"_json_pointer, {{"cpus", -1}})),
            "catalog: case \"cpu.loop.python\": limits.cpus: must be above 0 and at most 1024");
}

TEST(LoadCatalog, rejects_an_unknown_or_repeated_oracle) {
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/oracles"_json_pointer, {"canaries", "leftover"})),
            "catalog: case \"cpu.loop.python\": oracles[1]: unknown oracle \"leftover\"");
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/oracles"_json_pointer, {"tty", "tty"})),
            "catalog: case \"cpu.loop.python\": oracles[0]: oracle \"tty\" is listed twice");
}

TEST(LoadCatalog, rejects_a_max_count_pattern_without_exactly_one_group) {
  auto error_for = [](const std::string& pattern) {
    json expect = {{"max_count", {{"pattern", pattern}, {"max", 1}}}};
    return ErrorFor(With(MinimalCase(), "/expect"_json_pointer, expect));
  };
  EXPECT_EQ(error_for("SPAWNED \\d+"),
            "catalog: case \"cpu.loop.python\": expect.max_count.pattern: \"SPAWNED \\\\d+\" "
            "must have exactly one capture group (has 0)");
  EXPECT_EQ(error_for("(A) (\\d+)"),
            "catalog: case \"cpu.loop.python\": expect.max_count.pattern: \"(A) (\\\\d+)\" "
            "must have exactly one capture group (has 2)");
  EXPECT_NE(error_for("SPAWNED (\\d+")
                .find("expect.max_count.pattern: \"SPAWNED (\\\\d+\" is "
                      "not a valid regex"),
            std::string::npos);
}

TEST(LoadCatalog, rejects_a_max_count_without_its_max) {
  json expect = {{"max_count", {{"pattern", "N (\\d+)"}}}};
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/expect"_json_pointer, expect)),
            "catalog: case \"cpu.loop.python\": expect.max_count.max: is required");
}

TEST(LoadCatalog, rejects_a_forbid_pattern_that_does_not_compile) {
  json expect = {{"forbid", {"ok", "[unclosed"}}};
  EXPECT_NE(ErrorFor(With(MinimalCase(), "/expect"_json_pointer, expect))
                .find("catalog: case \"cpu.loop.python\": expect.forbid[1]: \"[unclosed\" is not "
                      "a valid regex"),
            std::string::npos);
}

TEST(LoadCatalog, rejects_a_payload_that_does_not_exist) {
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/payload"_json_pointer, "python/nope.py")),
            "catalog: case \"cpu.loop.python\": payload python/nope.py does not exist");
}

TEST(LoadCatalog, rejects_a_payload_outside_the_catalog_directory) {
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/payload"_json_pointer, "../etc/passwd")),
            "catalog: case \"cpu.loop.python\": payload: \"../etc/passwd\" must be relative to "
            "the catalog, without ..");
}

TEST(LoadCatalog, rejects_duplicate_or_invalid_mount_names) {
  json in = {{"name", "in"}, {"target", "/in"}};
  json again = {{"name", "in"}, {"target", "/in2"}};
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/mounts"_json_pointer, {in, again})),
            "catalog: case \"cpu.loop.python\": mounts[1].name: duplicate mount name \"in\"");
  json bad = {{"name", "In-put"}, {"target", "/in"}};
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/mounts"_json_pointer, {bad})),
            "catalog: case \"cpu.loop.python\": mounts[0].name: \"In-put\" must match [a-z0-9_]+");
}

TEST(LoadCatalog, rejects_mount_targets_that_are_relative_repeated_or_over_the_payloads) {
  auto error_for = [](const json& mounts) {
    return ErrorFor(With(MinimalCase(), "/mounts"_json_pointer, mounts));
  };
  EXPECT_EQ(error_for({{{"name", "in"}, {"target", "in"}}}),
            "catalog: case \"cpu.loop.python\": mounts[0].target: \"in\" must be a normalized "
            "absolute path other than /");
  EXPECT_EQ(error_for({{{"name", "a"}, {"target", "/in"}}, {{"name", "b"}, {"target", "/in"}}}),
            "catalog: case \"cpu.loop.python\": mounts[1].target: \"/in\" is mounted twice");
  EXPECT_EQ(error_for({{{"name", "a"}, {"target", "/payload/x"}}}),
            "catalog: case \"cpu.loop.python\": mounts[0].target: \"/payload/x\" is where the "
            "payloads are mounted");
  EXPECT_EQ(error_for({{{"name", "a"}, {"target", "/in"}, {"mode", "wo"}}}),
            "catalog: case \"cpu.loop.python\": mounts[0].mode: must be ro or rw (got \"wo\")");
}

TEST(LoadCatalog, rejects_a_path_canary_that_is_not_a_boolean) {
  json mount = {{"name", "in"}, {"target", "/in"}, {"path_canary", "yes"}};
  std::string error = ErrorFor(With(MinimalCase(), "/mounts"_json_pointer, {mount}));
  EXPECT_NE(error.find("mounts[0].path_canary"), std::string::npos) << error;
}

TEST(LoadCatalog, rejects_planted_files_that_leave_their_mount) {
  json mount = {{"name", "in"}, {"target", "/in"}, {"files", {{"../x", "a"}}}};
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/mounts"_json_pointer, {mount})),
            "catalog: case \"cpu.loop.python\": mounts[0].files.../x: must be a relative path "
            "without ..");
}

TEST(LoadCatalog, rejects_outputs_outside_a_rw_mount) {
  json c = MinimalCase();
  c["mounts"] = {{{"name", "in"}, {"mode", "ro"}, {"target", "/in"}},
                 {{"name", "out"}, {"mode", "rw"}, {"target", "/out"}}};
  const std::string reason = ": must start with the name of a rw mount and /";
  c["expect"] = {{"outputs", {{"in/result.json", ""}}}};
  EXPECT_EQ(ErrorFor(c),
            "catalog: case \"cpu.loop.python\": expect.outputs.in/result.json" + reason);
  c["expect"] = {{"outputs", {{"result.json", ""}}}};
  EXPECT_EQ(ErrorFor(c), "catalog: case \"cpu.loop.python\": expect.outputs.result.json" + reason);
  c["expect"] = {{"outputs", {{"outs/result.json", ""}}}};
  EXPECT_EQ(ErrorFor(c),
            "catalog: case \"cpu.loop.python\": expect.outputs.outs/result.json" + reason);
  c["expect"] = {{"outputs", {{"out/result.json", ""}}}};
  EXPECT_EQ(ErrorFor(c), "<loaded>");
}

TEST(LoadCatalog, rejects_a_functional_case_that_expects_nothing) {
  json c = MinimalCase();
  c["kind"] = "functional";
  EXPECT_EQ(ErrorFor(c),
            "catalog: case \"cpu.loop.python\": expect: a functional case needs "
            "stdout_contains, outputs or status");
  c["expect"] = {{"status", {"exited"}}};
  EXPECT_EQ(ErrorFor(c), "<loaded>");
}

TEST(LoadCatalog, rejects_an_arg_naming_a_mount_the_case_does_not_have) {
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/args"_json_pointer, {"{mount:out}/x"})),
            "catalog: case \"cpu.loop.python\": args[0]: no mount named \"out\"");
}

TEST(LoadCatalog, rejects_an_env_name_that_is_not_a_variable) {
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/env"_json_pointer, {{"A=B", "c"}})),
            "catalog: case \"cpu.loop.python\": env: \"A=B\" is not a variable name");
}

json EgressCase(json egress) {
  json c = MinimalCase();
  c["id"] = "egress.loop.python";
  c["category"] = "egress";
  c["egress"] = std::move(egress);
  return c;
}

TEST(LoadCatalog, reads_an_egress_cases_policy) {
  CatalogDir dir;
  json c = EgressCase({{"net", true}, {"allow_host", {"api.allowed.test:80", "*.allowed.test"}},
                       {"allow_cidr", {"192.0.2.10/32"}}});
  auto catalog = LoadCatalog(dir.WriteCases(json::array({c})));
  ASSERT_TRUE(catalog) << catalog.error().ToString();
  const auto& egress = catalog->cases.at(0).egress;
  ASSERT_TRUE(egress.has_value());
  EXPECT_TRUE(egress->net);
  EXPECT_EQ(egress->allow_host, (std::vector<std::string>{"api.allowed.test:80", "*.allowed.test"}));
  EXPECT_EQ(egress->allow_cidr, (std::vector<std::string>{"192.0.2.10/32"}));
  EXPECT_TRUE(egress->deny_cidr.empty());
  EXPECT_FALSE(egress->net_limit.has_value());
  c = EgressCase({{"allow_cidr", {"192.0.2.0/24"}}, {"deny_cidr", {"192.0.2.20/32"}}, {"net_limit", 2048}});
  catalog = LoadCatalog(dir.WriteCases(json::array({c})));
  ASSERT_TRUE(catalog) << catalog.error().ToString();
  EXPECT_EQ(catalog->cases.at(0).egress->deny_cidr, (std::vector<std::string>{"192.0.2.20/32"}));
  EXPECT_EQ(catalog->cases.at(0).egress->net_limit, 2048);
  EXPECT_FALSE(catalog->cases.at(0).egress->trust_test_ca);
  c = EgressCase({{"allow_host", {"api.allowed.test"}}, {"trust_test_ca", true}});
  catalog = LoadCatalog(dir.WriteCases(json::array({c})));
  ASSERT_TRUE(catalog) << catalog.error().ToString();
  EXPECT_TRUE(catalog->cases.at(0).egress->trust_test_ca);
  catalog = LoadCatalog(dir.WriteCases(json::array({MinimalCase()})));
  ASSERT_TRUE(catalog) << catalog.error().ToString();
  EXPECT_FALSE(catalog->cases.at(0).egress.has_value());
}

TEST(LoadCatalog, an_egress_policy_belongs_to_egress_cases_and_each_of_them_needs_one) {
  const std::string named = "catalog: case \"egress.loop.python\": ";
  json c = EgressCase({{"net", true}});
  c.erase("egress");
  EXPECT_EQ(ErrorFor(c), named + "egress: is required in category egress");
  EXPECT_EQ(ErrorFor(With(MinimalCase(), "/egress"_json_pointer, {{"net", true}})),
            "catalog: case \"cpu.loop.python\": egress: belongs to category egress only");
  EXPECT_EQ(ErrorFor(EgressCase(json::object())),
            named + "egress: needs net, allow_host or allow_cidr: a case without a policy has no network");
  EXPECT_EQ(ErrorFor(EgressCase({{"net", false}, {"allow_host", json::array()}})),
            named + "egress: needs net, allow_host or allow_cidr: a case without a policy has no network");
}

TEST(LoadCatalog, rejects_a_bad_egress_policy_naming_the_field) {
  const std::string named = "catalog: case \"egress.loop.python\": ";
  EXPECT_EQ(ErrorFor(EgressCase({{"allow_hosts", {"a.test"}}})), named + "egress: unknown field \"allow_hosts\"");
  EXPECT_EQ(ErrorFor(EgressCase({{"net", "yes"}})), named + "egress.net: must be true or false");
  EXPECT_EQ(ErrorFor(EgressCase({{"net", true}, {"trust_test_ca", 1}})), named + "egress.trust_test_ca: must be true or false");
  EXPECT_EQ(ErrorFor(EgressCase({{"allow_host", "a.test"}})), named + "egress.allow_host: must be an array of strings");
  EXPECT_EQ(ErrorFor(EgressCase({{"allow_host", {"a.test", "b.test --net"}}})),
            named + "egress.allow_host[1]: must be a name or range without spaces");
  EXPECT_EQ(ErrorFor(EgressCase({{"allow_cidr", {""}}})),
            named + "egress.allow_cidr[0]: must be a name or range without spaces");
  EXPECT_EQ(ErrorFor(EgressCase({{"net", true}, {"deny_cidr", {"10.0.0.0/8 --net"}}})),
            named + "egress.deny_cidr[0]: must be a name or range without spaces");
  EXPECT_EQ(ErrorFor(EgressCase({{"net", true}, {"net_limit", 0}})),
            named + "egress.net_limit: must be at least 1 byte");
  EXPECT_EQ(ErrorFor(EgressCase({{"net", true}, {"net_limit", "2K"}})),
            named + "egress.net_limit: must be an integer");
  // A deny rule or a byte cap alone opens nothing: the case would have no network.
  EXPECT_EQ(ErrorFor(EgressCase({{"deny_cidr", {"192.0.2.20/32"}}, {"net_limit", 10}})),
            named + "egress: needs net, allow_host or allow_cidr: a case without a policy has no network");
}

TEST(LoadCatalog, every_shipped_egress_case_first_proves_its_allowed_fetch) {
  // Without the control, a sandbox with no network at all would pass every egress attack.
  auto catalog = LoadCatalog(std::string(SMOLVM_CHECK_SOURCE_DIR) + "/adversarial/catalog.json");
  ASSERT_TRUE(catalog) << catalog.error().ToString();
  int egress = 0;
  for (const Case& c : catalog->cases) {
    if (c.category != "egress") continue;
    ++egress;
    EXPECT_TRUE(c.egress.has_value()) << c.id;
    const auto& wanted = c.expect.stdout_contains;
    EXPECT_NE(std::find(wanted.begin(), wanted.end(), "CONTROL ok"), wanted.end()) << c.id;
    if (c.adversarial) {
      EXPECT_EQ(c.expect.forbid, (std::vector<std::string>{"BREACH"})) << c.id;
    }
  }
  EXPECT_GE(egress, 20);
}

// ---------------------------------------------------------------------------
// SelectCases

TEST(SelectCases, filters_by_glob_and_by_category) {
  Catalog catalog;
  for (const char* id : {"cpu.loop.python", "cpu.loop.js", "memory.grow.python"}) {
    Case c;
    c.id = id;
    c.category = std::string(id).substr(0, std::string(id).find('.'));
    catalog.cases.push_back(c);
  }
  auto ids = [](const std::vector<Case>& cases) {
    std::vector<std::string> out;
    for (const Case& c : cases) out.push_back(c.id);
    return out;
  };
  EXPECT_EQ(ids(SelectCases(catalog, {"*"}, "")).size(), 3u);
  EXPECT_EQ(ids(SelectCases(catalog, {""}, "")).size(), 3u);
  EXPECT_EQ(ids(SelectCases(catalog, {}, "")).size(), 3u);
  EXPECT_EQ(ids(SelectCases(catalog, {"*.python"}, "")),
            (std::vector<std::string>{"cpu.loop.python", "memory.grow.python"}));
  EXPECT_EQ(ids(SelectCases(catalog, {"*", "cpu.*"}, "")).size(), 3u) << "a case two globs match is taken once";
  EXPECT_EQ(ids(SelectCases(catalog, {"*.js", "memory.*"}, "")),
            (std::vector<std::string>{"cpu.loop.js", "memory.grow.python"}));
  EXPECT_EQ(ids(SelectCases(catalog, {"*"}, "cpu")),
            (std::vector<std::string>{"cpu.loop.python", "cpu.loop.js"}));
  EXPECT_EQ(ids(SelectCases(catalog, {"*.python"}, "cpu")),
            (std::vector<std::string>{"cpu.loop.python"}));
  EXPECT_TRUE(SelectCases(catalog, {"nothing*"}, "").empty());
  EXPECT_TRUE(SelectCases(catalog, {"nothing*", "cpu.loop"}, "").empty());
}

}  // namespace
}  // namespace smolvm_check
