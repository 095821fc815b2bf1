#include "smolbox/spec.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>

#include "test_support.h"

namespace smolbox {
namespace {

using namespace std::string_literals;

using smolbox::testing::ErrorOf;
using smolbox::testing::TempDir;

std::string ParseError(const std::string& json) { return ErrorOf(ParseRunSpec(json)); }

// ---------------------------------------------------------------------------
// ParseRunSpec

TEST(ParseRunSpec, reads_every_field) {
  auto spec = ParseRunSpec(R"json({
    "backend": "ns", "image": "/images/py", "argv": ["python3", "-c", "print(1)"],
    "stdin": "data", "env": {"A": "1", "B": ""}, "workdir": "/tmp",
    "limits": {"timeout_ms": 1000, "cpu_ms": 500, "memory_mib": 64, "cpus": 0.5, "pids": 8,
               "storage_mib": 32, "output_bytes": 4096, "files": 32},
    "network": "none", "mounts": [{"source": "/src", "target": "/dst", "mode": "ro"}],
    "user": "root", "vm_snapshot": false})json");
  ASSERT_TRUE(spec) << spec.error().ToString();
  EXPECT_EQ(spec->sandbox.backend, BackendKind::kNs);
  EXPECT_EQ(spec->sandbox.image, "/images/py");
  EXPECT_EQ(spec->exec.argv, (std::vector<std::string>{"python3", "-c", "print(1)"}));
  EXPECT_EQ(spec->exec.stdin_data, "data");
  EXPECT_EQ(spec->exec.env, (std::map<std::string, std::string>{{"A", "1"}, {"B", ""}}));
  EXPECT_EQ(spec->sandbox.workdir, "/tmp");
  EXPECT_EQ(spec->exec.limits.timeout_ms, 1000);
  EXPECT_EQ(spec->exec.limits.cpu_ms, 500);
  EXPECT_EQ(spec->sandbox.limits.memory_mib, 64);
  EXPECT_EQ(spec->sandbox.limits.cpus, 0.5);
  EXPECT_EQ(spec->sandbox.limits.pids, 8);
  EXPECT_EQ(spec->sandbox.limits.storage_mib, 32);
  EXPECT_EQ(spec->exec.limits.output_bytes, 4096);
  EXPECT_EQ(spec->exec.limits.files, 32);
  ASSERT_EQ(spec->sandbox.mounts.size(), 1u);
  EXPECT_EQ(spec->sandbox.mounts[0].source, "/src");
  EXPECT_EQ(spec->sandbox.mounts[0].target, "/dst");
  EXPECT_TRUE(spec->sandbox.mounts[0].read_only);
  EXPECT_EQ(spec->sandbox.user, WorkloadUser::Root());
  EXPECT_FALSE(spec->sandbox.vm_snapshot);
}

TEST(ParseRunSpec, keeps_the_defaults_for_absent_fields) {
  auto spec = ParseRunSpec("{}");
  ASSERT_TRUE(spec);
  RunSpec defaults;
  EXPECT_EQ(spec->sandbox.backend, defaults.sandbox.backend);
  EXPECT_EQ(spec->sandbox.image, "host");
  EXPECT_EQ(spec->sandbox.workdir, defaults.sandbox.workdir);
  EXPECT_EQ(spec->exec.limits.timeout_ms, defaults.exec.limits.timeout_ms);
  EXPECT_EQ(spec->sandbox.limits.memory_mib, defaults.sandbox.limits.memory_mib);
  EXPECT_FALSE(spec->exec.limits.cpu_ms);
  EXPECT_FALSE(spec->exec.stdin_data);
  EXPECT_EQ(spec->sandbox.user, WorkloadUser::Sandbox());
  EXPECT_TRUE(spec->sandbox.vm_snapshot);
}

TEST(ParseRunSpec, reads_vm_snapshot_as_a_boolean_only) {
  auto on = ParseRunSpec(R"({"vm_snapshot": true})");
  ASSERT_TRUE(on);
  EXPECT_TRUE(on->sandbox.vm_snapshot);
  EXPECT_EQ(ParseError(R"({"vm_snapshot": "no"})"), "vm_snapshot: must be true or false");
  EXPECT_EQ(ParseError(R"({"vm_snapshot": 0})"), "vm_snapshot: must be true or false");
}

// A created sandbox's: validation takes it for a sandbox and refuses it for a run.
TEST(ParseRunSpec, reads_prewarm_which_a_sandbox_on_vm_takes_and_a_run_refuses) {
  auto spec = ParseRunSpec(R"({"backend": "vm", "prewarm": "python", "argv": ["python3"]})");
  ASSERT_TRUE(spec) << spec.error().ToString();
  EXPECT_EQ(spec->sandbox.prewarm, "python");
  EXPECT_EQ(ErrorOf(ValidateSandboxSpec(spec->sandbox)), "<no error>");
  EXPECT_EQ(ErrorOf(ValidateRunSpec(*spec)), "prewarm: is for a created sandbox's execs; a run has only one");
  spec->sandbox.backend = BackendKind::kNs;
  EXPECT_EQ(ErrorOf(ValidateSandboxSpec(spec->sandbox)), "prewarm: needs the vm backend");
  spec->sandbox.backend = BackendKind::kVm;
  spec->sandbox.prewarm = "node";
  EXPECT_EQ(ErrorOf(ValidateSandboxSpec(spec->sandbox)), "prewarm: must be python (got \"node\")");
  EXPECT_EQ(ParseError(R"({"prewarm": 1})"), "prewarm: must be a string");
}

TEST(ParseRunSpec, reads_stdin_file) {
  auto spec = ParseRunSpec(R"({"stdin_file": "/tmp/in"})");
  ASSERT_TRUE(spec);
  EXPECT_EQ(spec->exec.stdin_file, "/tmp/in");
}

TEST(ParseRunSpec, reads_an_entrypoint_which_validation_refuses_unless_the_image_step_applied_it) {
  auto spec = ParseRunSpec(R"({"entrypoint": ["python3", "-u"], "argv": ["main.py"]})");
  ASSERT_TRUE(spec) << spec.error().ToString();
  EXPECT_EQ(spec->exec.entrypoint, (std::vector<std::string>{"python3", "-u"}));
  auto none = ParseRunSpec(R"({"entrypoint": []})");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->exec.entrypoint, std::vector<std::string>{});
  EXPECT_EQ(ParseError(R"({"entrypoint": "python3"})"), "entrypoint: must be an array of strings");
  // Never dropped: a spec that reaches validation with it is refused.
  EXPECT_NE(ErrorOf(ValidateRunSpec(*spec)).find("entrypoint: was not applied"), std::string::npos);
}

TEST(ParseRunSpec, reads_null_as_unset_for_optional_fields) {
  auto spec = ParseRunSpec(R"({"stdin": null, "stdin_file": null, "limits": {"cpu_ms": null}})");
  ASSERT_TRUE(spec) << spec.error().ToString();
  EXPECT_FALSE(spec->exec.stdin_data);
  EXPECT_FALSE(spec->exec.stdin_file);
  EXPECT_FALSE(spec->exec.limits.cpu_ms);
}

TEST(ParseRunSpec, names_an_unknown_top_level_field) {
  EXPECT_EQ(ParseError(R"({"argv": ["x"], "comand": "y"})"), "comand: unknown field");
}

TEST(ParseRunSpec, names_an_unknown_nested_field_by_its_dotted_path) {
  EXPECT_EQ(ParseError(R"({"limits": {"memroy_mib": 5}})"), "limits.memroy_mib: unknown field");
  EXPECT_EQ(ParseError(R"({"mounts": [{"source": "/a", "target": "/b"},
                                      {"source": "/a", "target": "/c", "mod": "ro"}]})"),
            "mounts[1].mod: unknown field");
}

TEST(ParseRunSpec, names_an_empty_unknown_key_by_its_json_spelling) {
  EXPECT_EQ(ParseError(R"({"argv": ["x"], "": 1})"), "\"\": unknown field");
  EXPECT_EQ(ParseError(R"({"limits": {"": 1}})"), "limits.\"\": unknown field");
}

TEST(ParseRunSpec, names_the_field_of_a_wrong_type) {
  EXPECT_EQ(ParseError(R"({"limits": {"pids": "8"}})"), "limits.pids: must be an integer");
  EXPECT_EQ(ParseError(R"({"limits": {"pids": 1.5}})"), "limits.pids: must be an integer");
  EXPECT_EQ(ParseError(R"({"limits": {"cpus": "1"}})"), "limits.cpus: must be a number");
  EXPECT_EQ(ParseError(R"({"limits": 5})"), "limits: must be an object");
  EXPECT_EQ(ParseError(R"({"argv": "ls"})"), "argv: must be an array of strings");
  EXPECT_EQ(ParseError(R"({"argv": ["ls", 5]})"), "argv[1]: must be a string");
  EXPECT_EQ(ParseError(R"({"env": {"A": 1}})"), "env.A: must be a string");
  EXPECT_EQ(ParseError(R"({"env": ["A=1"]})"), "env: must be an object of strings");
  EXPECT_EQ(ParseError(R"({"image": null})"), "image: must be a string");
  EXPECT_EQ(ParseError(R"({"stdin": 5})"), "stdin: must be a string");
  EXPECT_EQ(ParseError(R"({"mounts": {}})"), "mounts: must be an array of mounts");
  EXPECT_EQ(ParseError(R"({"mounts": ["/a:/b"]})"), "mounts[0]: must be an object");
  EXPECT_EQ(ParseError(R"({"mounts": [{"source": 1, "target": "/b"}]})"),
            "mounts[0].source: must be a string");
}

TEST(ParseRunSpec, accepts_fractional_cpus_and_integral_ones) {
  EXPECT_EQ(ParseRunSpec(R"({"limits": {"cpus": 1.25}})")->sandbox.limits.cpus, 1.25);
  EXPECT_EQ(ParseRunSpec(R"({"limits": {"cpus": 2}})")->sandbox.limits.cpus, 2.0);
}

TEST(ParseRunSpec, rejects_integers_beyond_int64) {
  EXPECT_EQ(ParseError(R"({"limits": {"pids": 18446744073709551615}})"),
            "limits.pids: is out of range");
}

TEST(ParseRunSpec, reports_malformed_json_with_its_byte_offset) {
  std::string error = ParseError(R"({"argv": [})");
  EXPECT_TRUE(error.starts_with("spec: malformed JSON at byte 11: ")) << error;
  EXPECT_EQ(error.find("json.exception"), std::string::npos) << error;
  EXPECT_TRUE(ParseError("").starts_with("spec: malformed JSON at byte 1: "));
}

TEST(ParseRunSpec, rejects_a_document_that_is_not_an_object) {
  EXPECT_EQ(ParseError("[]"), "spec: must be an object");
  EXPECT_EQ(ParseError("5"), "spec: must be an object");
}

TEST(ParseRunSpec, rejects_duplicate_fields_naming_their_path) {
  EXPECT_EQ(ParseError(R"({"argv": ["a"], "argv": ["b"]})"), "argv: duplicate field");
  EXPECT_EQ(ParseError(R"({"limits": {"pids": 1, "pids": 2}})"), "limits.pids: duplicate field");
  EXPECT_EQ(ParseError(R"({"mounts": [{"source": "/a", "target": "/b"},
                                      {"source": "/a", "target": "/c", "target": "/d"}]})"),
            "mounts[1].target: duplicate field");
}

TEST(ParseRunSpec, allows_equal_keys_in_different_objects) {
  EXPECT_TRUE(ParseRunSpec(R"({"mounts": [{"source": "/a", "target": "/b"},
                                          {"source": "/a", "target": "/c"}]})"));
}

TEST(ParseRunSpec, rejects_an_unknown_backend_and_user) {
  EXPECT_EQ(ParseError(R"({"backend": "docker"})"),
            "backend: must be auto, ns or vm (got \"docker\")");
  EXPECT_EQ(ParseError(R"({"user": "admin"})"), "user: must be sandbox, root or UID[:GID] with ids 0 to 65535 (got \"admin\")");
}

TEST(ParseRunSpec, accepts_only_network_none) {
  EXPECT_TRUE(ParseRunSpec(R"({"network": "none"})"));
  EXPECT_EQ(ParseError(R"({"network": "host"})"), "network: only \"none\" is supported");
  EXPECT_EQ(ParseError(R"({"network": true})"), "network: only \"none\" is supported");
}

TEST(ParseRunSpec, makes_mounts_read_write_unless_told_otherwise) {
  auto spec = ParseRunSpec(R"({"mounts": [{"source": "/a", "target": "/b"},
                                          {"source": "/a", "target": "/c", "mode": "rw"}]})");
  ASSERT_TRUE(spec);
  EXPECT_FALSE(spec->sandbox.mounts[0].read_only);
  EXPECT_FALSE(spec->sandbox.mounts[1].read_only);
}

TEST(ParseRunSpec, rejects_a_bad_mount_mode) {
  EXPECT_EQ(ParseError(R"({"mounts": [{"source": "/a", "target": "/b", "mode": "rx"}]})"),
            "mounts[0].mode: must be ro or rw (got \"rx\")");
}

TEST(ParseRunSpec, requires_mount_source_and_target) {
  EXPECT_EQ(ParseError(R"({"mounts": [{"source": "/a"}]})"), "mounts[0].target: is required");
  EXPECT_EQ(ParseError(R"({"mounts": [{"target": "/a"}]})"), "mounts[0].source: is required");
}

TEST(ParseRunSpec, names_a_duplicate_field_by_its_path_after_scalars_and_nested_arrays) {
  EXPECT_EQ(ParseError(R"({"argv": ["a", ["b"], "c"], "env": {"A": "1"},
                           "mounts": [{"source": "/a", "target": "/b"}, {},
                                      {"source": "/a", "mode": "ro", "mode": "rw"}]})"),
            "mounts[2].mode: duplicate field");
}

TEST(ParseRunSpec, refuses_a_number_beyond_a_double_without_throwing) {
  EXPECT_EQ(ParseError(R"({"limits": {"cpus": 1e999}})"),
            "spec: malformed JSON: number overflow parsing '1e999'");
}

// ---------------------------------------------------------------------------
// ParseRunSpec's bounds

// The parse, in a child held to 1 GiB of address space: without the bound, a deep spec takes
// gigabytes (50,000 levels took 3.7 GB), and this test must fail rather than take the machine.
struct BoundedParse {
  bool refused_naming_the_limit = false;
  std::chrono::milliseconds took{};
};

BoundedParse ParseDeepSpecInChild(const std::string& text, const std::string& expected_error) {
  auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    rlimit as{1UL << 30, 1UL << 30};
    setrlimit(RLIMIT_AS, &as);
    alarm(10);
    auto spec = ParseRunSpec(text, "spec file deep.json");
    _exit(!spec && spec.error().ToString() == expected_error ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  BoundedParse out;
  out.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  out.refused_naming_the_limit = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return out;
}

TEST(ParseRunSpec, refuses_200000_nested_brackets_quickly_naming_the_depth_limit) {
  std::string text = std::string(200000, '[') + std::string(200000, ']');
  auto parse = ParseDeepSpecInChild(text, "spec file deep.json: nesting deeper than 32 levels");
  EXPECT_TRUE(parse.refused_naming_the_limit);
  EXPECT_LT(parse.took, std::chrono::seconds(2));
}

TEST(ParseRunSpec, reads_a_spec_exactly_at_the_depth_limit_as_far_as_its_fields) {
  // {"argv": [[...]]} is 32 levels: refused for its type, not for its depth.
  std::string at_limit = R"({"argv": )" + std::string(31, '[') + std::string(31, ']') + "}";
  EXPECT_EQ(ParseError(at_limit), "argv[0]: must be a string");
  std::string deeper = R"({"argv": )" + std::string(32, '[') + std::string(32, ']') + "}";
  EXPECT_EQ(ParseError(deeper), "spec: nesting deeper than 32 levels");
}

TEST(ParseRunSpec, refuses_a_spec_over_64_MiB_naming_the_limit) {
  std::string stdin_data(kMaxSpecBytes - std::string_view(R"({"stdin": ""})").size(), 'x');
  std::string at_limit = R"({"stdin": ")" + stdin_data + R"("})";
  ASSERT_EQ(at_limit.size(), kMaxSpecBytes);
  auto spec = ParseRunSpec(at_limit);
  ASSERT_TRUE(spec) << spec.error().ToString();
  EXPECT_EQ(spec->exec.stdin_data->size(), stdin_data.size());
  EXPECT_EQ(ParseError(at_limit + " "), "spec: 67108865 bytes is over the 64 MiB limit");
}

TEST(ParseRunSpec, refuses_a_spec_of_more_values_than_any_command_could_take) {
  std::string argv = R"({"argv": [)";
  for (int i = 0; i < (1 << 18); ++i) argv += "\"\",";
  argv += "\"\"]}";
  EXPECT_EQ(ParseError(argv), "spec: more than 262144 values");
}

// ---------------------------------------------------------------------------
// ValidateRunSpec

// A scratch directory with one of each kind of file a spec can point at.
class ValidateRunSpecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directory(Path("dir"));
    dir_.Write("file", "hello");
    std::filesystem::create_symlink(Path("dir"), Path("link"));
    ASSERT_EQ(mkfifo(Path("fifo").c_str(), 0600), 0);
    spec_.exec.argv = {"/bin/true"};
  }

  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }
  std::string ValidateError() const { return ErrorOf(ValidateRunSpec(spec_)); }
  // A limit by its name in the spec's "limits", in whichever part of the RunSpec holds it.
  void SetLimit(int64_t Limits::*member, int64_t value) {
    Limits all = spec_.limits();
    all.*member = value;
    spec_.set_limits(all);
  }
  std::string WithMount(std::string source, std::string target) {
    spec_.sandbox.mounts.push_back(Mount{std::move(source), std::move(target), false});
    return ValidateError();
  }

  TempDir dir_{"smolbox-spec-test"};
  RunSpec spec_;
};

TEST_F(ValidateRunSpecTest, accepts_a_command_with_default_limits) {
  EXPECT_EQ(ValidateError(), "<no error>");
}

TEST_F(ValidateRunSpecTest, rejects_an_empty_command) {
  spec_.exec.argv = {};
  EXPECT_EQ(ValidateError(), "argv: the command is empty");
  spec_.exec.argv = {"", "x"};
  EXPECT_EQ(ValidateError(), "argv: the command is empty");
}

TEST_F(ValidateRunSpecTest, rejects_nul_bytes_in_argv) {
  spec_.exec.argv = {"/bin/echo", "a\0b"s};
  EXPECT_EQ(ValidateError(), "argv[1]: contains a NUL byte");
}

TEST_F(ValidateRunSpecTest, rejects_bad_environment_names_and_values) {
  spec_.exec.env = {{"", "x"}};
  EXPECT_EQ(ValidateError(), "env: a variable name is empty");
  spec_.exec.env = {{"A=B", "x"}};
  EXPECT_EQ(ValidateError(), "env: variable name \"A=B\" contains \"=\"");
  spec_.exec.env = {{"A\0B"s, "x"}};
  EXPECT_EQ(ValidateError(), "env: variable name \"A\\x00B\" contains a NUL byte");
  spec_.exec.env = {{"A", "x\0y"s}};
  EXPECT_EQ(ValidateError(), "env.A: contains a NUL byte");
  spec_.exec.env = {{"PATH", "/usr/bin"}, {"EMPTY", ""}};
  EXPECT_EQ(ValidateError(), "<no error>");
}

struct LimitCase {
  const char* field;
  int64_t Limits::*member;
  int64_t min;
  int64_t max;
  const char* unit;
};

const LimitCase kLimitCases[] = {
    {"timeout_ms", &Limits::timeout_ms, 1, kMaxTimeoutMs, " ms"},
    {"memory_mib", &Limits::memory_mib, 16, kMaxMemoryMiB, " MiB"},
    {"pids", &Limits::pids, 1, kMaxPids, ""},
    {"storage_mib", &Limits::storage_mib, 1, kMaxStorageMiB, " MiB"},
    {"output_bytes", &Limits::output_bytes, 1, kMaxOutputBytes, " bytes"},
    {"files", &Limits::files, 16, kMaxFiles, ""},
};

TEST_F(ValidateRunSpecTest, rejects_each_limit_below_its_minimum) {
  for (const LimitCase& c : kLimitCases) {
    RunSpec saved = spec_;
    SetLimit(c.member, c.min - 1);
    EXPECT_EQ(ValidateError(), fmt::format("limits.{}: must be between {} and {}{} (got {})",
                                           c.field, c.min, c.max, c.unit, c.min - 1));
    spec_ = saved;
  }
}

TEST_F(ValidateRunSpecTest, rejects_each_limit_above_its_maximum) {
  for (const LimitCase& c : kLimitCases) {
    RunSpec saved = spec_;
    SetLimit(c.member, c.max + 1);
    EXPECT_NE(ValidateError().find(fmt::format("limits.{}: must be between", c.field)),
              std::string::npos)
        << c.field;
    spec_ = saved;
  }
}

TEST_F(ValidateRunSpecTest, accepts_each_limit_at_its_bounds) {
  for (const LimitCase& c : kLimitCases) {
    for (int64_t value : {c.min, c.max}) {
      RunSpec saved = spec_;
      SetLimit(c.member, value);
      EXPECT_EQ(ValidateError(), "<no error>") << c.field << "=" << value;
      spec_ = saved;
    }
  }
}

TEST_F(ValidateRunSpecTest, words_the_memory_error_for_a_person) {
  spec_.sandbox.limits.memory_mib = 0;
  EXPECT_EQ(ValidateError(), "limits.memory_mib: must be between 16 and 262144 MiB (got 0)");
}

TEST_F(ValidateRunSpecTest, checks_cpu_time_only_when_set) {
  spec_.exec.limits.cpu_ms = 0;
  EXPECT_EQ(ValidateError(),
            fmt::format("limits.cpu_ms: must be between 1 and {} ms (got 0)", kMaxTimeoutMs));
  spec_.exec.limits.cpu_ms = 1;
  EXPECT_EQ(ValidateError(), "<no error>");
  spec_.exec.limits.cpu_ms.reset();
  EXPECT_EQ(ValidateError(), "<no error>");
}

TEST_F(ValidateRunSpecTest, rejects_cpus_that_are_not_positive_finite_and_bounded) {
  for (double cpus : {0.0, -1.0, kMaxCpus + 0.5, std::numeric_limits<double>::quiet_NaN(),
                      std::numeric_limits<double>::infinity()}) {
    spec_.sandbox.limits.cpus = cpus;
    EXPECT_TRUE(ValidateError().starts_with("limits.cpus: must be greater than 0 and at most 1024"))
        << cpus;
  }
  spec_.sandbox.limits.cpus = 0;
  EXPECT_EQ(ValidateError(), "limits.cpus: must be greater than 0 and at most 1024 (got 0)");
  spec_.sandbox.limits.cpus = 0.25;
  EXPECT_EQ(ValidateError(), "<no error>");
}

TEST_F(ValidateRunSpecTest, accepts_the_host_image_and_an_existing_directory) {
  spec_.sandbox.image = "host";
  EXPECT_EQ(ValidateError(), "<no error>");
  spec_.sandbox.image = Path("dir");
  EXPECT_EQ(ValidateError(), "<no error>");
}

TEST_F(ValidateRunSpecTest, rejects_an_image_that_is_not_local) {
  spec_.sandbox.image = "python:3.12";
  EXPECT_EQ(ValidateError(),
            "image: no such local image \"python:3.12\" (images are never pulled; add one with smolbox image import FILE)");
  spec_.sandbox.image = Path("missing");
  EXPECT_EQ(
      ValidateError(),
      fmt::format("image: no such rootfs directory {}", spec_.sandbox.image));
  spec_.sandbox.image = "";
  EXPECT_TRUE(ValidateError().starts_with("image: no such local image"));
}

TEST_F(ValidateRunSpecTest, rejects_an_image_that_is_a_file) {
  spec_.sandbox.image = Path("file");
  EXPECT_EQ(ValidateError(), fmt::format("image: {} is not a directory", spec_.sandbox.image));
}

TEST_F(ValidateRunSpecTest, accepts_absolute_workdirs) {
  for (const char* workdir : {"/", "/work", "/home/sandbox/x", "/devices", "/work/"}) {
    spec_.sandbox.workdir = workdir;
    EXPECT_EQ(ValidateError(), "<no error>") << workdir;
  }
}

TEST_F(ValidateRunSpecTest, rejects_a_relative_workdir) {
  spec_.sandbox.workdir = "work";
  EXPECT_EQ(ValidateError(), "workdir: must be an absolute path (got \"work\")");
  spec_.sandbox.workdir = "";
  EXPECT_EQ(ValidateError(), "workdir: must be an absolute path (got \"\")");
}

TEST_F(ValidateRunSpecTest, rejects_dot_components_in_the_workdir) {
  spec_.sandbox.workdir = "/work/../etc";
  EXPECT_EQ(ValidateError(), "workdir: must not contain \".\" or \"..\" (got /work/../etc)");
  spec_.sandbox.workdir = "/work/.";
  EXPECT_FALSE(ValidateRunSpec(spec_));
}

TEST_F(ValidateRunSpecTest, rejects_a_workdir_under_proc_dev_or_sys) {
  spec_.sandbox.workdir = "/proc/self";
  EXPECT_EQ(ValidateError(), "workdir: must not be under /proc (got /proc/self)");
  spec_.sandbox.workdir = "/dev";
  EXPECT_EQ(ValidateError(), "workdir: must not be under /dev (got /dev)");
  spec_.sandbox.workdir = "//sys/fs";
  EXPECT_EQ(ValidateError(), "workdir: must not be under /sys (got //sys/fs)");
}

TEST_F(ValidateRunSpecTest, accepts_directory_and_file_mount_sources) {
  EXPECT_EQ(WithMount(Path("dir"), "/data"), "<no error>");
  EXPECT_EQ(WithMount(Path("file"), "/etc/config"), "<no error>");
}

TEST_F(ValidateRunSpecTest, rejects_a_missing_mount_source_naming_its_index) {
  spec_.sandbox.mounts.push_back(Mount{Path("dir"), "/a", false});
  EXPECT_EQ(WithMount(Path("missing"), "/b"),
            fmt::format("mounts[1].source: {} does not exist", Path("missing")));
}

TEST_F(ValidateRunSpecTest, rejects_a_relative_mount_source) {
  EXPECT_EQ(WithMount("dir", "/data"), "mounts[0].source: must be an absolute path (got \"dir\")");
}

TEST_F(ValidateRunSpecTest, rejects_a_mount_source_that_is_a_symlink_or_fifo) {
  EXPECT_EQ(WithMount(Path("link"), "/a"),
            fmt::format("mounts[0].source: {} is not a directory or a regular file", Path("link")));
  spec_.sandbox.mounts.clear();
  EXPECT_EQ(WithMount(Path("fifo"), "/a"),
            fmt::format("mounts[0].source: {} is not a directory or a regular file", Path("fifo")));
}

TEST_F(ValidateRunSpecTest, rejects_a_relative_mount_target) {
  EXPECT_EQ(WithMount(Path("dir"), "data"),
            "mounts[0].target: must be an absolute path (got \"data\")");
}

TEST_F(ValidateRunSpecTest, rejects_dot_components_in_a_mount_target) {
  EXPECT_EQ(WithMount(Path("dir"), "/a/../proc"),
            "mounts[0].target: must not contain \".\" or \"..\" (got /a/../proc)");
  spec_.sandbox.mounts.clear();
  EXPECT_TRUE(WithMount(Path("dir"), "/a/.").starts_with("mounts[0].target: must not contain"));
}

TEST_F(ValidateRunSpecTest, rejects_a_mount_target_that_is_not_normalized) {
  EXPECT_EQ(WithMount(Path("dir"), "/a//b"),
            "mounts[0].target: must be normalized, without \"//\" or a trailing \"/\" (got /a//b)");
  spec_.sandbox.mounts.clear();
  EXPECT_TRUE(WithMount(Path("dir"), "/a/").starts_with("mounts[0].target: must be normalized"));
}

TEST_F(ValidateRunSpecTest, rejects_the_root_as_a_mount_target) {
  EXPECT_EQ(WithMount(Path("dir"), "/"), "mounts[0].target: must not be /");
}

TEST_F(ValidateRunSpecTest, rejects_mount_targets_that_shadow_proc_dev_or_sys) {
  EXPECT_EQ(WithMount(Path("dir"), "/proc/x"), "mounts[0].target: /proc/x shadows /proc");
  spec_.sandbox.mounts.clear();
  EXPECT_EQ(WithMount(Path("dir"), "/dev"), "mounts[0].target: /dev shadows /dev");
  spec_.sandbox.mounts.clear();
  EXPECT_EQ(WithMount(Path("dir"), "/sys/fs/cgroup"),
            "mounts[0].target: /sys/fs/cgroup shadows /sys");
  spec_.sandbox.mounts.clear();
  EXPECT_EQ(WithMount(Path("dir"), "/system"), "<no error>");
}

TEST_F(ValidateRunSpecTest, rejects_two_mounts_on_one_target) {
  spec_.sandbox.mounts.push_back(Mount{Path("dir"), "/data", false});
  EXPECT_EQ(WithMount(Path("file"), "/data"),
            "mounts[1].target: /data is also the target of mounts[0]");
}

TEST_F(ValidateRunSpecTest, rejects_stdin_data_together_with_a_stdin_file) {
  spec_.exec.stdin_data = "x";
  spec_.exec.stdin_file = Path("file");
  EXPECT_EQ(ValidateError(), "stdin_file: cannot be combined with stdin");
}

TEST_F(ValidateRunSpecTest, accepts_a_regular_stdin_file) {
  spec_.exec.stdin_file = Path("file");
  EXPECT_EQ(ValidateError(), "<no error>");
}

TEST_F(ValidateRunSpecTest, rejects_a_missing_stdin_file_or_a_directory) {
  spec_.exec.stdin_file = Path("missing");
  EXPECT_EQ(ValidateError(), fmt::format("stdin_file: {} does not exist", Path("missing")));
  spec_.exec.stdin_file = Path("dir");
  EXPECT_EQ(ValidateError(), fmt::format("stdin_file: {} is a directory", Path("dir")));
}

TEST_F(ValidateRunSpecTest, escapes_unprintable_paths_in_messages) {
  EXPECT_EQ(WithMount(Path("dir"), "/proc/a\nb"),
            "mounts[0].target: \"/proc/a\\nb\" shadows /proc");
}

// ---------------------------------------------------------------------------
// Names and volumes

TEST(BackendKindNames, round_trip) {
  for (BackendKind kind : {BackendKind::kAuto, BackendKind::kNs, BackendKind::kVm}) {
    EXPECT_EQ(ParseBackendKind(ToString(kind)), kind);
  }
  EXPECT_EQ(ToString(BackendKind::kVm), "vm");
}

TEST(BackendKindNames, reject_an_unknown_name) {
  EXPECT_EQ(ErrorOf(ParseBackendKind("kvm")), "backend: must be auto, ns or vm (got \"kvm\")");
}

TEST(WorkloadUserNames, round_trip) {
  EXPECT_EQ(ToString(WorkloadUser::Sandbox()), "sandbox");
  EXPECT_EQ(ParseWorkloadUser("root"), WorkloadUser::Root());
  EXPECT_EQ(ParseWorkloadUser("sandbox"), WorkloadUser::Sandbox());
  EXPECT_EQ(ParseWorkloadUser("1234"), (WorkloadUser{1234, 1234}));
  EXPECT_EQ(ParseWorkloadUser("1234:55"), (WorkloadUser{1234, 55}));
  EXPECT_EQ(ToString(WorkloadUser{1234, 55}), "1234:55");
  EXPECT_EQ(ParseWorkloadUser("0:0"), WorkloadUser::Root());
  for (const char* bad : {"Root", "65536", "1:65536", "-1", "1:", ":1", "12a"}) {
    auto refused = ParseWorkloadUser(bad);
    ASSERT_FALSE(refused) << bad;
    EXPECT_EQ(refused.error().where, "user");
  }
}

TEST(ParseVolume, reads_host_and_guest_as_read_write) {
  auto mount = ParseVolume("/src:/dst");
  ASSERT_TRUE(mount);
  EXPECT_EQ(mount->source, "/src");
  EXPECT_EQ(mount->target, "/dst");
  EXPECT_FALSE(mount->read_only);
}

TEST(ParseVolume, reads_the_mode) {
  EXPECT_TRUE(ParseVolume("/src:/dst:ro")->read_only);
  EXPECT_FALSE(ParseVolume("/src:/dst:rw")->read_only);
}

TEST(ParseVolume, leaves_a_relative_host_path_alone) {
  EXPECT_EQ(ParseVolume("data:/data")->source, "data");
}

TEST(ParseVolume, rejects_a_bad_mode) {
  EXPECT_EQ(ErrorOf(ParseVolume("/a:/b:rx")), "--volume: mode must be ro or rw (got \"rx\")");
  EXPECT_EQ(ErrorOf(ParseVolume("/a:/b:")), "--volume: mode must be ro or rw (got \"\")");
}

TEST(ParseVolume, rejects_missing_or_extra_parts) {
  EXPECT_EQ(ErrorOf(ParseVolume("/a")), "--volume: expected HOST:GUEST[:ro|rw] (got \"/a\")");
  for (const char* text : {"", ":/b", "/a:", ":", "/a:/b:ro:x"}) {
    EXPECT_FALSE(ParseVolume(text)) << text;
  }
}

}  // namespace
}  // namespace smolbox
