// config.json to a sandbox: what maps, what smolbox replaces (and says so), and what it refuses
// with an error naming the field.
#include "oci_config.h"

#include <gtest/gtest.h>

#include <string>

#include "oci_bundle.h"

namespace smolbox::testing {
namespace {

using nlohmann::json;
using oci::ParseOciConfig;

Expected<oci::OciContainer> Parse(const OciBundle& bundle, const json& config,
                                  BackendKind backend = BackendKind::kAuto) {
  return ParseOciConfig(config.dump(), bundle.path(), backend);
}

// The field the error names, or "" when it parsed.
std::string RefusedField(const OciBundle& bundle, const json& config) {
  auto parsed = Parse(bundle, config);
  return parsed ? "" : parsed.error().where;
}

TEST(OciConfig, maps_the_process_root_and_limits_onto_the_sandbox) {
  OciBundle bundle;
  json config = bundle.config;
  config["process"]["args"] = {"/bin/sh", "-c", "echo hi"};
  config["process"]["env"] = {"PATH=/bin", "GREETING=a=b"};
  config["process"]["cwd"] = "/srv";
  config["process"]["user"] = {{"uid", 1234}, {"gid", 99}};
  config["process"]["rlimits"] = {{{"type", "RLIMIT_NOFILE"}, {"soft", 512}, {"hard", 512}},
                                  {{"type", "RLIMIT_CPU"}, {"soft", 7}, {"hard", 7}}};
  config["root"]["readonly"] = false;
  config["hostname"] = "web-1";
  config["linux"]["resources"] = {{"memory", {{"limit", 64 << 20}}},
                                  {"pids", {{"limit", 50}}},
                                  {"cpu", {{"quota", 50000}, {"period", 100000}, {"shares", 512}}}};
  config["mounts"].push_back({{"destination", "/data"},
                              {"type", "bind"},
                              {"source", bundle.rootfs() + "/bin"},
                              {"options", {"rbind", "ro"}}});
  config["linux"]["namespaces"].push_back({{"type", "network"}, {"path", "/run/netns/cni-1"}});
  config["mounts"].push_back(
      {{"destination", "/run"}, {"type", "tmpfs"}, {"source", "tmpfs"}, {"options", {"size=64k"}}});
  config["annotations"] = {
      {"io.smolbox.storage-mib", "32"}, {"io.smolbox.timeout-ms", "5000"}, {"org.example", "kept"}};
  auto parsed = Parse(bundle, config);
  ASSERT_TRUE(parsed) << parsed.error().ToString();
  const RunSpec& run = parsed->run;
  EXPECT_EQ(run.exec.argv, (std::vector<std::string>{"/bin/sh", "-c", "echo hi"}));
  EXPECT_EQ(run.exec.env.at("GREETING"), "a=b");
  EXPECT_EQ(run.exec.workdir, "/srv");
  EXPECT_EQ(run.sandbox.workdir, "/tmp") << "the storage must not hide the image's cwd";
  EXPECT_EQ(run.sandbox.user, (WorkloadUser{1234, 99}));
  EXPECT_EQ(run.exec.limits.files, 512);
  EXPECT_EQ(run.exec.limits.cpu_ms, 7000);
  EXPECT_EQ(run.exec.limits.timeout_ms, 5000);
  EXPECT_EQ(run.sandbox.image, bundle.rootfs());
  EXPECT_TRUE(run.sandbox.writable_root);
  EXPECT_EQ(run.sandbox.hostname, "web-1");
  EXPECT_EQ(run.sandbox.limits.memory_mib, 64);
  EXPECT_EQ(run.sandbox.limits.pids, 50);
  EXPECT_DOUBLE_EQ(run.sandbox.limits.cpus, 0.5);
  EXPECT_EQ(run.sandbox.cpu_shares, 512);
  EXPECT_EQ(run.sandbox.limits.storage_mib, 32);
  ASSERT_EQ(run.sandbox.mounts.size(), 2u);
  EXPECT_EQ(run.sandbox.mounts[0], (Mount{bundle.rootfs() + "/bin", "/data", true}));
  EXPECT_EQ(run.sandbox.network_namespace, "/run/netns/cni-1");
  EXPECT_EQ(run.sandbox.mounts[1].target, "/run");
  EXPECT_TRUE(run.sandbox.mounts[1].scratch) << "a tmpfs is an empty directory of the storage";
  EXPECT_FALSE(run.sandbox.mounts[1].read_only);
  EXPECT_EQ(parsed->annotations.at("org.example"), "kept");
  EXPECT_EQ(run.sandbox.backend, BackendKind::kNs);
}

TEST(OciConfig, says_what_smolbox_replaces_with_its_own_confinement) {
  OciBundle bundle;
  auto parsed = Parse(bundle, bundle.config);
  ASSERT_TRUE(parsed) << parsed.error().ToString();
  std::string notes;
  for (const auto& note : parsed->notes) notes += note + "\n";
  for (const char* field : {"process.capabilities", "/sys", "/dev/mqueue", "linux.maskedPaths",
                            "linux.resources.devices"}) {
    EXPECT_NE(notes.find(field), std::string::npos) << field << " is not in:\n" << notes;
  }
  EXPECT_FALSE(parsed->run.sandbox.writable_root) << "root.readonly true";
}

TEST(OciConfig, a_container_runs_for_as_long_as_smolbox_allows_and_says_all_it_prints) {
  OciBundle bundle;
  auto parsed = Parse(bundle, bundle.config);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->run.exec.limits.timeout_ms, kMaxTimeoutMs);
  EXPECT_EQ(parsed->run.exec.limits.output_bytes, kMaxOutputBytes);
}

TEST(OciConfig, the_cpu_time_annotation_bounds_the_whole_tree_in_ms_over_rlimit_cpu) {
  OciBundle bundle;
  json config = bundle.config;
  config["process"]["rlimits"] = {{{"type", "RLIMIT_CPU"}, {"soft", 7}, {"hard", 7}}};
  config["annotations"] = {{"io.smolbox.cpu-ms", "1500"}};
  auto parsed = Parse(bundle, config);
  ASSERT_TRUE(parsed) << parsed.error().ToString();
  EXPECT_EQ(parsed->run.exec.limits.cpu_ms, 1500);
}

// A guest has no network but smolbox's egress: the engine's namespace is not joined, and the log
// says so.
TEST(OciConfig, on_the_vm_backend_the_engines_network_is_not_the_guests_and_the_log_says_so) {
  OciBundle bundle;
  json config = bundle.config;
  config["linux"]["namespaces"].push_back({{"type", "network"}, {"path", "/run/netns/cni-1"}});
  config["annotations"] = {{"io.smolbox.backend", "vm"}, {"io.smolbox.accel", "tcg"}};
  auto parsed = Parse(bundle, config);
  ASSERT_TRUE(parsed) << parsed.error().ToString();
  EXPECT_EQ(parsed->run.sandbox.backend, BackendKind::kVm);
  EXPECT_EQ(parsed->run.sandbox.accel, Accel::kTcg);
  EXPECT_EQ(parsed->run.sandbox.network_namespace, "");
  bool noted = std::any_of(parsed->notes.begin(), parsed->notes.end(), [](const std::string& n) {
    return n.starts_with("linux.namespaces network path");
  });
  EXPECT_TRUE(noted);
}

TEST(OciConfig, the_backend_comes_from_the_flag_or_the_annotation_and_they_must_agree) {
  OciBundle bundle;
  json config = bundle.config;
  config["annotations"] = {{"io.smolbox.backend", "vm"}};
  auto annotated = Parse(bundle, config);
  ASSERT_TRUE(annotated) << annotated.error().ToString();
  EXPECT_EQ(annotated->run.sandbox.backend, BackendKind::kVm);
  auto flagged = Parse(bundle, bundle.config, BackendKind::kVm);
  ASSERT_TRUE(flagged);
  EXPECT_EQ(flagged->run.sandbox.backend, BackendKind::kVm);
  auto contradicted = Parse(bundle, config, BackendKind::kNs);
  ASSERT_FALSE(contradicted);
  EXPECT_EQ(contradicted.error().where, "annotations.io.smolbox.backend");
}

TEST(OciConfig, the_egress_annotation_is_the_specs_egress_without_the_operators_fields) {
  OciBundle bundle;
  json config = bundle.config;
  config["annotations"] = {{"io.smolbox.egress", R"({"allow_hosts": ["pypi.org:443"]})"}};
  auto parsed = Parse(bundle, config);
  ASSERT_TRUE(parsed) << parsed.error().ToString();
  ASSERT_EQ(parsed->run.sandbox.egress.policy.allow_hosts.size(), 1u);
  config["annotations"] = {
      {"io.smolbox.egress", R"({"allow_hosts": ["pypi.org:443"], "dns_server": "10.0.0.1"})"}};
  EXPECT_EQ(RefusedField(bundle, config), "annotations.io.smolbox.egress");
  config["annotations"] = {{"io.smolbox.egress", R"({"allow_hosts": ["no such host!"]})"}};
  EXPECT_EQ(RefusedField(bundle, config), "annotations.io.smolbox.egress.allow_hosts[0]");
}

// Each case: a change to runc's config, and the field its error must name.
struct Refusal {
  const char* name;
  void (*change)(json&);
  const char* field;
};

const Refusal kRefusals[] = {
    {"version 2", [](json& c) { c["ociVersion"] = "2.0.0"; }, "ociVersion"},
    {"no process", [](json& c) { c.erase("process"); }, "process"},
    {"no args", [](json& c) { c["process"]["args"] = json::array(); }, "process.args"},
    {"arg not a string",
     [](json& c) {
       c["process"]["args"] = {"/bin/sh", 7};
     },
     "process.args[1]"},
    {"env without =", [](json& c) { c["process"]["env"] = {"PATH"}; }, "process.env[0]"},
    {"no cwd", [](json& c) { c["process"].erase("cwd"); }, "process.cwd"},
    {"relative cwd", [](json& c) { c["process"]["cwd"] = "srv"; }, "workdir"},
    {"uid beyond the map", [](json& c) { c["process"]["user"]["uid"] = 70000; },
     "process.user.uid"},
    {"nofile too small", [](json& c) { c["process"]["rlimits"][0]["soft"] = 3; },
     "process.rlimits[0].soft"},
    {"no such rlimit", [](json& c) { c["process"]["rlimits"][0]["type"] = "NOFILE"; },
     "process.rlimits[0].type"},
    {"no root", [](json& c) { c.erase("root"); }, "root"},
    {"root not a directory", [](json& c) { c["root"]["path"] = "config.json"; }, "root.path"},
    {"memory below the floor",
     [](json& c) {
       c["linux"]["resources"]["memory"] = {{"limit", 1024}};
     },
     "linux.resources.memory.limit"},
    {"pids beyond the ceiling",
     [](json& c) {
       c["linux"]["resources"]["pids"] = {{"limit", 1 << 30}};
     },
     "linux.resources.pids.limit"},
    {"cpuset",
     [](json& c) {
       c["linux"]["resources"]["cpu"] = {{"cpus", "0-1"}};
     },
     "linux.resources.cpu.cpus"},
    {"memory's limit a string",
     [](json& c) {
       c["linux"]["resources"]["memory"] = {{"limit", "64m"}};
     },
     "linux.resources.memory.limit"},
    {"pids not an object", [](json& c) { c["linux"]["resources"]["pids"] = 50; },
     "linux.resources.pids"},
    {"cpu quota beyond 64 bits",
     [](json& c) {
       c["linux"]["resources"]["cpu"] = {{"quota", json::parse("18446744073709551615")}};
     },
     "linux.resources.cpu.quota"},
    {"a device",
     [](json& c) {
       c["linux"]["devices"] = {{{"path", "/dev/sda"}, {"type", "b"}}};
     },
     "linux.devices[0]"},
    {"a pid namespace to join",
     [](json& c) { c["linux"]["namespaces"][0]["path"] = "/proc/1/ns/pid"; },
     "linux.namespaces[0].path"},
    {"no such namespace", [](json& c) { c["linux"]["namespaces"][0]["type"] = "bogus"; },
     "linux.namespaces[0].type"},
    {"a hook inside the container",
     [](json& c) {
       c["hooks"] = {{"createContainer", {{{"path", "/bin/true"}}}}};
     },
     "hooks.createContainer"},
    {"a hook's relative path",
     [](json& c) {
       c["hooks"] = {{"prestart", {{{"path", "true"}}}}};
     },
     "hooks.prestart[0].path"},
    {"a hook's endless timeout",
     [](json& c) {
       c["hooks"] = {{"poststop", {{{"path", "/bin/true"}, {"timeout", 0}}}}};
     },
     "hooks.poststop[0].timeout"},
    {"hooks and egress",
     [](json& c) {
       c["hooks"] = {{"prestart", {{{"path", "/bin/true"}}}}};
       c["annotations"] = {{"io.smolbox.egress", R"({"net": true})"}};
     },
     "annotations.io.smolbox.egress"},
    {"a read-only tmpfs",
     [](json& c) {
       c["mounts"].push_back({{"destination", "/run"}, {"type", "tmpfs"}, {"options", {"ro"}}});
     },
     "mounts[7].options"},
    {"a sysfs elsewhere",
     [](json& c) {
       c["mounts"].push_back(
           {{"destination", "/host-sys"}, {"type", "sysfs"}, {"source", "sysfs"}});
     },
     "mounts[7].type"},
    {"a bind without source",
     [](json& c) {
       c["mounts"].push_back({{"destination", "/x"}, {"type", "bind"}});
     },
     "mounts[7].source"},
    {"an idmapped mount",
     [](json& c) {
       c["mounts"].push_back({{"destination", "/x"},
                              {"type", "bind"},
                              {"source", "/"},
                              {"uidMappings", json::array()}});
     },
     "mounts[7].uidMappings"},
    {"an unknown annotation of ours",
     [](json& c) {
       c["annotations"] = {{"io.smolbox.memory", "1"}};
     },
     "annotations.io.smolbox.memory"},
    {"storage beyond the ceiling",
     [](json& c) {
       c["annotations"] = {{"io.smolbox.storage-mib", "99999999999"}};
     },
     "annotations.io.smolbox.storage-mib"},
    {"an accelerator that is not one",
     [](json& c) {
       c["annotations"] = {{"io.smolbox.accel", "fast"}};
     },
     "annotations.io.smolbox.accel"},
    {"cpu shares below the kernel's floor",
     [](json& c) {
       c["linux"]["resources"] = {{"cpu", {{"shares", 1}}}};
     },
     "linux.resources.cpu.shares"},
    {"cpu time of zero",
     [](json& c) {
       c["annotations"] = {{"io.smolbox.cpu-ms", "0"}};
     },
     "annotations.io.smolbox.cpu-ms"},
    {"an annotation not a string",
     [](json& c) {
       c["annotations"] = {{"org.example", 1}};
     },
     "annotations.org.example"},
    {"a windows section", [](json& c) { c["windows"] = json::object(); }, "windows"},
    {"an unknown process field", [](json& c) { c["process"]["bogus"] = true; }, "process.bogus"},
    {"a hostname with a space", [](json& c) { c["hostname"] = "a b"; }, "hostname"},
    {"a personality",
     [](json& c) {
       c["linux"]["personality"] = {{"domain", "LINUX32"}};
     },
     "linux.personality"},
};

TEST(OciConfig, what_cannot_be_mapped_is_refused_naming_its_field) {
  OciBundle bundle;
  for (const auto& refusal : kRefusals) {
    json config = bundle.config;
    refusal.change(config);
    EXPECT_EQ(RefusedField(bundle, config), refusal.field) << refusal.name;
  }
}

TEST(OciConfig, hooks_are_the_hosts_and_a_network_namespace_for_them_is_the_runtimes_to_make) {
  OciBundle bundle;
  json config = bundle.config;
  config["hooks"] = {
      {"prestart", {{{"path", "/usr/bin/setkey"}, {"args", {"setkey", "a"}}, {"timeout", 5}}}},
      {"poststop", {{{"path", "/bin/true"}}}}};
  auto parsed = Parse(bundle, config);
  ASSERT_TRUE(parsed) << parsed.error().ToString();
  ASSERT_EQ(parsed->hooks.prestart.size(), 1u);
  EXPECT_EQ(parsed->hooks.prestart[0].args, (std::vector<std::string>{"setkey", "a"}));
  EXPECT_EQ(parsed->hooks.prestart[0].timeout_s, 5);
  EXPECT_EQ(parsed->hooks.poststop.size(), 1u);
  EXPECT_TRUE(parsed->own_network_namespace)
      << "docker's: a network namespace without a path, and hooks to set it up";
  auto without_hooks = Parse(bundle, bundle.config);
  ASSERT_TRUE(without_hooks);
  EXPECT_FALSE(without_hooks->own_network_namespace)
      << "without hooks the sandbox makes its own, inside its user namespace";
}

TEST(OciConfig, a_malformed_or_oversized_config_is_refused_as_a_whole) {
  OciBundle bundle;
  auto malformed = ParseOciConfig("{\"ociVersion\": ", bundle.path());
  ASSERT_FALSE(malformed);
  EXPECT_NE(malformed.error().ToString().find("config.json: malformed JSON"), std::string::npos)
      << malformed.error().ToString();
  auto huge = ParseOciConfig(std::string(oci::kMaxConfigBytes + 1, ' '), bundle.path());
  ASSERT_FALSE(huge);
  EXPECT_NE(huge.error().ToString().find("config.json"), std::string::npos);
  auto array = ParseOciConfig("[]", bundle.path());
  ASSERT_FALSE(array);
  EXPECT_EQ(array.error().where, "config.json");
}

TEST(OciConfig, container_ids_are_runcs) {
  EXPECT_TRUE(oci::CheckContainerId("web_1.a+b-c"));
  for (const char* bad : {"", ".", "..", "a/b", "a b", "x\n"}) {
    auto checked = oci::CheckContainerId(bad);
    ASSERT_FALSE(checked) << bad;
    EXPECT_EQ(checked.error().where, "container id");
  }
  EXPECT_FALSE(oci::CheckContainerId(std::string(1025, 'a')));
}

}  // namespace
}  // namespace smolbox::testing
