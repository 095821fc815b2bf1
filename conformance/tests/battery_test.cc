// The battery's own proof: it passes on smolbox's namespace sandbox, every adversarial case
// fails on `null` (no isolation) while every functional case passes there, peers run, and bad
// input is named.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "battery/json_check.h"
#include "check_runner.h"
#include "smolbox_runner.h"
#include "test_support.h"

namespace smolvm_check {
namespace {

using smolbox::testing::OnPath;
using smolbox::testing::ProgramRun;
using smolbox::testing::RunProgram;
using smolbox::testing::TempDir;

// The egress cases ran on the test internet rather than skipping: as root, it can be built.
void ExpectEgressRan(const nlohmann::json& report) {
  const nlohmann::json& egress = report["summary"]["by_category"]["egress"];
  EXPECT_GE(egress.value("pass", 0) + egress.value("fail", 0), 18) << egress.dump();
  EXPECT_EQ(egress.value("skip", -1), 0) << egress.dump();
}

std::string Failures(const nlohmann::json& report) {
  std::string text;
  if (!report.is_object()) return "(no report)";
  for (const auto& c : report["cases"]) {
    if (c["verdict"] != "pass") text += c["id"].get<std::string>() + ": " + c["verdict"].get<std::string>() + " " + c["reason"].get<std::string>() + "\n";
  }
  return text;
}

// A whole battery's run: a report, exit 0, every one of its cases passed, and the egress
// cases among them.
void ExpectEveryCasePassed(const Invocation& run) {
  ASSERT_TRUE(run.report.is_object()) << run.err;
  EXPECT_EQ(run.exit_code, 0) << Failures(run.report);
  EXPECT_GE(run.report["summary"]["total"].get<int>(), 72);
  EXPECT_EQ(run.report["summary"]["pass"], run.report["summary"]["total"]) << Failures(run.report);
  ExpectEgressRan(run.report);
}

TEST(Battery, every_case_passes_on_the_smolbox_namespace_sandbox) {
  TempDir scratch("smolvm-check-report-ns");
  std::string dir = scratch.path() + "/reports";
  auto run = RunCheck({"run", "--sandbox", "smolbox:ns", "-j", "2", "--json", "--report-dir", dir});
  ASSERT_TRUE(run.report.is_object()) << run.err;
  EXPECT_EQ(run.exit_code, 0) << Failures(run.report);
  EXPECT_GE(run.report["summary"]["total"].get<int>(), 72);
  ExpectEgressRan(run.report);
  for (const char* file : {"report.json", "junit.xml", "report.md"}) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + file)) << file;
  }
}

// The battery in a user's image: the image tests' py image (a Debian python3, node, dash and
// coreutils, built by umoci) is imported and is the sandbox's root, and every case still holds.
// smolvm-check gives smolbox a clean environment, so the image goes to the default store, under
// a tag of this run's own, removed afterwards.
class BatteryInImage : public ::testing::Test {
 protected:
  void SetUp() override {
    smolbox::testing::ProgramRun build = smolbox::testing::RunProgram(
        {"/bin/bash", SMOLBOX_IMAGE_TEST_DIR "/build_test_images.sh", images_.path(),
         smolbox::testing::HelperPath("file_cat"), tag_});
    ASSERT_EQ(build.exit_code, 0) << build.err;
    auto imported = smolbox::testing::RunSmolbox({"image", "import", images_.path() + "/py.tar"});
    ASSERT_EQ(imported.exit_code, 0) << imported.err;
    imported_ = true;
  }
  void TearDown() override {
    if (imported_) {
      EXPECT_EQ(smolbox::testing::RunSmolbox({"image", "rm", image()}).exit_code, 0);
    }
  }
  std::string image() const { return "test/py:" + tag_; }

 private:
  TempDir images_{"smolvm-check-image"};
  std::string tag_ = fmt::format("battery-{}", getpid());
  bool imported_ = false;
};

TEST_F(BatteryInImage, every_case_passes_on_the_smolbox_namespace_sandbox_in_an_imported_image) {
  auto run = RunCheck({"run", "--sandbox", "smolbox:ns@" + image(), "-j", "2", "--json"});
  ExpectEveryCasePassed(run);
}

// The same battery through smolbox serve's HTTP API: each case one POST /v1/run to a server the
// run starts, with its volumes beneath the server's volume root; the server is gone after.
TEST(Battery, every_case_passes_through_the_smolbox_api) {
  auto run = RunCheck({"run", "--sandbox", "smolbox:api", "-j", "2", "--json"});
  ExpectEveryCasePassed(run);
  ProgramRun servers = RunProgram({"pgrep", "-f", "serve --listen unix:/tmp/smolvm-check"});
  EXPECT_EQ(servers.exit_code, 1) << "the battery's server outlived it: " << servers.out;
}

// One microVM per case, under QEMU's emulation: the same battery, a guest kernel per case.
TEST(Battery, every_case_passes_on_the_smolbox_vm_sandbox_under_emulation) {
  auto run = RunCheck({"run", "--sandbox", "smolbox:vm-tcg", "-j", "2", "--json"});
  ExpectEveryCasePassed(run);
}

// The same, run by an unprivileged uid (nobody): the vm backend without root, its QEMU in a user
// namespace of that user's and its storage a tmpfs. smolvm-check itself runs as that uid, so the
// cases' files are that user's, as a user's own files are. Its test internet and test host need
// root (network namespaces), so the cases that reach them skip, and say so.
TEST(Battery, every_case_passes_on_the_smolbox_vm_sandbox_under_emulation_without_root) {
  // The checkout may sit where that uid cannot read (below /root): the battery's catalog, its
  // payloads and the profiles go along in a directory anyone may read.
  TempDir files("smolvm-check-rootless");
  const auto recursive = std::filesystem::copy_options::recursive;
  std::filesystem::copy(std::string(SMOLVM_CHECK_SOURCE_DIR) + "/adversarial", files.path() + "/adversarial", recursive);
  std::filesystem::copy(std::string(SMOLVM_CHECK_SOURCE_DIR) + "/conformance/profiles", files.path() + "/profiles",
                        recursive);
  for (const auto& entry : std::filesystem::recursive_directory_iterator(files.path())) {
    auto readable = std::filesystem::perms::others_read | std::filesystem::perms::group_read;
    if (entry.is_directory()) readable |= std::filesystem::perms::others_exec | std::filesystem::perms::group_exec;
    std::filesystem::permissions(entry.path(), readable, std::filesystem::perm_options::add);
  }
  auto run = RunCheckWithoutRoot({"run", "--sandbox", "smolbox:vm-tcg", "--catalog",
                                  files.path() + "/adversarial/catalog.json", "--profiles", files.path() + "/profiles",
                                  "-j", "2", "--json"});
  ASSERT_TRUE(run.report.is_object()) << run.err;
  EXPECT_EQ(run.exit_code, 0) << Failures(run.report);
  const nlohmann::json& summary = run.report["summary"];
  EXPECT_EQ(summary["fail"], 0) << Failures(run.report);
  EXPECT_EQ(summary["error"], 0) << Failures(run.report);
  EXPECT_GE(summary["pass"].get<int>(), 180) << Failures(run.report);
  // Only the cases whose test hosts take root to build (network namespaces) skip, and no other.
  for (const auto& c : run.report["cases"]) {
    if (c["verdict"] != "skip") continue;
    std::string category = c["category"];
    EXPECT_TRUE(category == "egress" || category == "network") << c["id"] << ": " << c["reason"];
    EXPECT_NE(c["reason"].get<std::string>().find("needs root"), std::string::npos) << c["id"] << ": " << c["reason"];
  }
}

TEST(Battery, every_adversarial_case_fails_and_every_functional_case_passes_without_isolation) {
  // About twenty adversarial cases run to their own 10 s bound here: four at a time takes the run
  // from 195 s (two at a time) to 123 s on two cores.
  auto run = RunCheck({"run", "--sandbox", "null", "-j", "4", "--json"});
  ASSERT_TRUE(run.report.is_object()) << run.err;
  EXPECT_EQ(run.exit_code, 1);
  int adversarial = 0;
  for (const auto& c : run.report["cases"]) {
    std::string id = c["id"];
    if (c["kind"] == "adversarial") {
      ++adversarial;
      EXPECT_EQ(c["verdict"], "fail") << id << " held without any sandbox: the case cannot fail (" << c["reason"] << ")";
    } else {
      EXPECT_EQ(c["verdict"], "pass") << id << ": " << c["reason"];
    }
  }
  EXPECT_GE(adversarial, 60);
  ExpectEgressRan(run.report);
}

class Peer : public ::testing::TestWithParam<const char*> {};

// A peer's run of the shell cases (ten categories) and the egress cases, which no peer's profile
// can express. The whole battery on each peer is scripts/peer-tables' work (docs/peers/): here it
// would only repeat the same payloads.
void ExpectAPeerVerdictForEachCase(const Invocation& run) {
  ASSERT_TRUE(run.report.is_object()) << run.err;
  // Peers are compared, not gated: failing cases are expected; a broken run is not.
  EXPECT_TRUE(run.exit_code == 0 || run.exit_code == 1) << run.err;
  EXPECT_GE(run.report["summary"]["total"].get<int>(), 40);
  EXPECT_GE(run.report["summary"]["pass"].get<int>(), 12) << Failures(run.report);
  for (const auto& c : run.report["cases"]) {
    EXPECT_NE(c["verdict"], "error") << c["id"] << ": the profile could not drive the peer: " << c["reason"];
  }
  // Its profile has no way to give an egress policy: every egress case skips, and says why.
  for (const auto& c : run.report["cases"]) {
    if (c["category"] != "egress") continue;
    EXPECT_EQ(c["verdict"], "skip") << c["id"];
    EXPECT_NE(c["reason"].get<std::string>().find("cannot express an egress policy"), std::string::npos) << c["reason"];
  }
}

TEST_P(Peer, runs_the_shell_cases_and_the_egress_cases_and_reports_a_verdict_for_each) {
  // scripts/setup installs each peer where the distribution has it; Ubuntu 24.04 may lack runsc.
  if (!OnPath(GetParam())) {
    GTEST_SKIP() << GetParam() << " is not installed: this distribution's archive lacks it";
  }
  ExpectAPeerVerdictForEachCase(
      RunCheck({"run", "--sandbox", GetParam(), "--filter", "*.sh", "--filter", "egress.*", "-j", "2", "--json"}));
}

INSTANTIATE_TEST_SUITE_P(Installed, Peer, ::testing::Values("bwrap", "runsc", "firejail"));

// Peers that run on a local image, as their users run them: the image tests' py image, built
// for the test under a tag of its own, where the peer's binary is installed.
class LocalImagePeer : public ::testing::Test {
 protected:
  LocalImagePeer(const char* binary, const char* package) : binary_(binary), package_(package) {}
  void SetUp() override {
    if (!OnPath(binary_)) {
      GTEST_SKIP() << binary_ << " is not installed: this distribution's archive lacks " << package_;
    }
    ProgramRun build = RunProgram({"/bin/bash", SMOLBOX_IMAGE_TEST_DIR "/build_test_images.sh", images_.path(),
                                   smolbox::testing::HelperPath("file_cat"), tag_});
    ASSERT_EQ(build.exit_code, 0) << build.err;
  }
  std::string archive() const { return images_.path() + "/py.tar"; }  // tagged test/py:TAG
  const std::string& tag() const { return tag_; }
  const std::string& scratch() const { return images_.path(); }

 private:
  const char* binary_;
  const char* package_;
  TempDir images_{"smolvm-check-peer-image"};
  std::string tag_ = fmt::format("peer-{}", getpid());
};

// Unlike bwrap's, runsc do's and firejail's, the profiles of podman and docker map a pids limit, a
// size on the writable tmpfs and a timeout that ends the container: those cases hold.
void ExpectTheMappedLimitsHold(const Invocation& run) {
  for (const auto& c : run.report["cases"]) {
    std::string id = c["id"];
    if (id == "pids.fork_bomb.sh" || id == "disk.fill_tmp.sh" || id == "cpu.while_true.sh" ||
        id.starts_with("functional.")) {
      EXPECT_EQ(c["verdict"], "pass") << id << ": " << c["reason"];
    }
  }
}

// podman's image is loaded before the battery, under a local name, and removed afterwards.
class PodmanPeer : public LocalImagePeer {
 protected:
  PodmanPeer() : LocalImagePeer("podman", "podman") {}
  void SetUp() override {
    LocalImagePeer::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ProgramRun load = RunProgram({"podman", "load", "--quiet", "--input", archive()});
    ASSERT_EQ(load.exit_code, 0) << load.err;
    // A docker archive's name gets docker.io/ in front; the profile's --pull never keeps podman
    // from ever looking there, and the test's own name is a local one.
    std::string loaded = "docker.io/test/py:" + tag();
    ASSERT_EQ(RunProgram({"podman", "tag", loaded, image()}).exit_code, 0);
    loaded_ = true;
    EXPECT_EQ(RunProgram({"podman", "untag", image(), loaded}).exit_code, 0);
  }
  void TearDown() override {
    if (loaded_) {
      EXPECT_EQ(RunProgram({"podman", "rmi", image()}).exit_code, 0);
    }
  }
  std::string image() const { return "localhost/smolvm-check/py:" + tag(); }

 private:
  bool loaded_ = false;
};

TEST_F(PodmanPeer, runs_the_shell_cases_on_a_local_image_and_holds_the_limits_it_maps) {
  auto run = RunCheck({"run", "--sandbox", "podman", "--var", "image=" + image(), "--filter", "*.sh", "--filter",
                       "egress.*", "-j", "2", "--json"});
  ExpectAPeerVerdictForEachCase(run);
  ExpectTheMappedLimitsHold(run);
}

// podman with smolbox as its OCI runtime (conformance/profiles/podman-smolbox.json): every case
// that runs passes, as on smolbox's own ns sandbox. The egress cases skip: podman's network
// namespace and smolbox's egress policy do not combine.
class PodmanWithSmolbox : public PodmanPeer {};

TEST_F(PodmanWithSmolbox, every_case_passes_through_podman_with_smolbox_as_its_runtime) {
  auto run = RunCheck({"run", "--sandbox", "podman-smolbox", "--var", "image=" + image(), "--var",
                       "smolbox_oci=" + smolbox::testing::SmolboxPath() + "-oci", "-j", "2", "--json"});
  ASSERT_TRUE(run.report.is_object()) << run.err;
  EXPECT_EQ(run.exit_code, 0) << Failures(run.report);
  const nlohmann::json& summary = run.report["summary"];
  EXPECT_EQ(summary["fail"], 0) << Failures(run.report);
  EXPECT_EQ(summary["error"], 0) << Failures(run.report);
  EXPECT_GE(summary["pass"].get<int>(), 190) << Failures(run.report);
  EXPECT_EQ(summary["skip"], summary["by_category"]["egress"]["skip"]) << "only egress skips";
}

// The same on the vm backend, under emulation here, for the cases that ask most of the guest's
// isolation (privilege) and that see the engine's files in its root (the mounts): the whole
// battery takes 10 min under emulation, which docs/oci.md quotes.
class PodmanWithSmolboxInVm : public PodmanPeer {};

TEST_F(PodmanWithSmolboxInVm, every_privilege_and_mounts_case_passes_with_the_container_in_a_guest) {
  auto run = RunCheck({"run", "--sandbox", "podman-smolbox", "--var", "image=" + image(), "--var",
                       "smolbox_oci=" + smolbox::testing::SmolboxPath() + "-oci", "--var", "backend=vm",
                       "--var", "accel=tcg", "--filter", "privilege.*", "--filter", "info.mounts.*", "-j", "2",
                       "--json"});
  ASSERT_TRUE(run.report.is_object()) << run.err;
  EXPECT_EQ(run.exit_code, 0) << Failures(run.report);
  const nlohmann::json& summary = run.report["summary"];
  EXPECT_GE(summary["total"].get<int>(), 25);
  EXPECT_EQ(summary["pass"], summary["total"]) << Failures(run.report);
}

// podman as an unprivileged uid: the profile's setup loads the archive into that uid's storage
// under a directory of its own, and the teardown removes it with what podman left running.
class PodmanRootlessPeer : public LocalImagePeer {
 protected:
  PodmanRootlessPeer() : LocalImagePeer("podman", "podman") {}
  // Under /run, which the uid may traverse: the scratch directory is root's alone. Short:
  // podman refuses a runroot (DIR/run/s) over 50 characters.
  std::string podman_dir() const { return fmt::format("/run/smolvm-check-podman-{}", getpid()); }
  static constexpr const char* kUid = "65020";
  std::string helper() const { return std::string(SMOLVM_CHECK_SOURCE_DIR) + "/conformance/profiles/podman-rootless-peer"; }
  void ExpectNothingLeft() {
    EXPECT_FALSE(std::filesystem::exists(podman_dir())) << "the teardown left the podman directory";
    // The killed pause process is init's to reap, which may take a moment.
    ProgramRun left;
    smolbox::testing::WaitUntil([&] { return (left = RunProgram({"pgrep", "-u", kUid})).exit_code == 1; }, std::chrono::seconds(10));
    EXPECT_EQ(left.exit_code, 1) << "processes of uid " << kUid << " are left: " << left.out;
  }
};

TEST_F(PodmanRootlessPeer, runs_the_workload_as_the_unprivileged_uid_alone_and_removes_its_storage) {
  ProgramRun start = RunProgram({helper(), "start", podman_dir(), kUid, "localhost/smolvm-check/py:" + tag(), archive()});
  ASSERT_EQ(start.exit_code, 0) << start.err;
  ProgramRun id = RunProgram({helper(), "podman", podman_dir(), kUid, "run", "--rm", "--pull", "never", "--network",
                              "none", "--cap-drop", "all", "--user", "0:0", "localhost/smolvm-check/py:" + tag(),
                              "/bin/sh", "-c", "cat /proc/self/uid_map; grep -E '^(Uid|CapEff):' /proc/self/status"});
  ProgramRun stop = RunProgram({helper(), "stop", podman_dir(), kUid});
  EXPECT_EQ(stop.exit_code, 0) << stop.err;
  ASSERT_EQ(id.exit_code, 0) << id.err;
  // Root inside, the unprivileged uid outside and nothing else mapped, with no capability.
  std::istringstream lines(id.out);
  std::string map_inside, map_outside, map_count, uid_label, uid, cap_label, cap_value;
  lines >> map_inside >> map_outside >> map_count >> uid_label >> uid;
  lines.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  lines >> cap_label >> cap_value;
  EXPECT_EQ(uid_label + " " + uid, "Uid: 0") << id.out;
  EXPECT_EQ(map_inside + " " + map_outside + " " + map_count, std::string("0 ") + kUid + " 1") << id.out;
  EXPECT_EQ(cap_value, "0000000000000000") << id.out;
  ExpectNothingLeft();
}

TEST_F(PodmanRootlessPeer, runs_the_shell_cases_and_holds_the_tmpfs_size_and_the_timeout) {
  auto run = RunCheck({"run", "--sandbox", "podman-rootless", "--var", "image=localhost/smolvm-check/py:" + tag(),
                       "--var", "image_archive=" + archive(), "--var", "podman_dir=" + podman_dir(), "--var",
                       std::string("podman_uid=") + kUid, "--filter", "*.sh", "--filter", "egress.*", "-j", "2",
                       "--json"});
  ASSERT_TRUE(run.report.is_object()) << run.err;
  ExpectAPeerVerdictForEachCase(run);
  // The cgroup limits hold only where the uid may have cgroups of its own (cgroup v2, delegated):
  // on a host whose controllers are v1 podman ignores them, with a warning.
  for (const auto& c : run.report["cases"]) {
    std::string id = c["id"];
    if (id == "disk.fill_tmp.sh" || id == "cpu.while_true.sh" || id.starts_with("functional.")) {
      EXPECT_EQ(c["verdict"], "pass") << id << ": " << c["reason"];
    }
  }
  ExpectNothingLeft();
}

// docker's profile starts a dockerd of its own in its setup, loads the archive into it, and
// stops it and removes its directory in its teardown.
class DockerPeer : public LocalImagePeer {
 protected:
  DockerPeer() : LocalImagePeer("dockerd", "docker.io") {}
};

TEST_F(DockerPeer, starts_its_own_daemon_runs_the_shell_cases_and_leaves_nothing) {
  std::string docker_dir = scratch() + "/docker";
  auto run = RunCheck({"run", "--sandbox", "docker", "--var", "image=smolvm-check/py:" + tag(), "--var",
                       "image_archive=" + archive(), "--var", "docker_dir=" + docker_dir, "--filter", "*.sh",
                       "--filter", "egress.*", "-j", "2", "--json"});
  ExpectAPeerVerdictForEachCase(run);
  ExpectTheMappedLimitsHold(run);
  // The version is the daemon's (dockerd, in sbin), read while the daemon runs.
  EXPECT_TRUE(run.report.value("sandbox_version", "").starts_with("Docker version ")) << run.report["sandbox_version"];
  EXPECT_FALSE(std::filesystem::exists(docker_dir)) << "the teardown left the daemon's directory";
  ProgramRun daemons = RunProgram({"pgrep", "-f", "dockerd --data-root " + docker_dir});
  EXPECT_EQ(daemons.exit_code, 1) << "the teardown left the daemon running: " << daemons.out;
}

// smolvm's profile needs KVM; here it is validated only.
TEST(Peer, a_syntax_only_profile_validates_and_skips_every_case) {
  auto run = RunCheck({"run", "--sandbox", "smolvm", "--filter", "functional.*", "--json"});
  ASSERT_TRUE(run.report.is_object()) << run.err;
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.report["summary"]["skip"], run.report["summary"]["total"]);
}

// A catalog or profile of its own for one test, removed afterwards.
class TempFile {
 public:
  explicit TempFile(const std::string& content) : path_(dir_.Write("input.json", content)) {}
  const std::string& path() const { return path_; }

 private:
  TempDir dir_{"smolvm-check-input"};
  std::string path_;
};

TEST(BadInput, a_malformed_catalog_entry_names_the_case_and_field) {
  TempFile catalog(R"({"version": 1, "cases": [{"id": "x.bad", "category": "cpu", "kind": "adversarial",
    "lang": "python", "payload": "python/nope.py", "expect": {"status": ["timout"]}}]})");
  auto run = RunCheck({"run", "--sandbox", "null", "--catalog", catalog.path()});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("x.bad"), std::string::npos) << run.err;
}

TEST(BadInput, an_unknown_profile_field_is_named) {
  TempFile profile(R"({"name": "typo", "comand": ["x"], "command": ["{argv...}"], "result": "exit_code"})");
  auto run = RunCheck({"run", "--sandbox", profile.path()});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("comand"), std::string::npos) << run.err;
}

TEST(BadInput, a_missing_sandbox_binary_is_named) {
  TempFile profile(R"({"name": "ghost", "binary": "no-such-sandbox-binary", "command": ["no-such-sandbox-binary", "{argv...}"], "result": "exit_code"})");
  auto run = RunCheck({"run", "--sandbox", profile.path()});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("no-such-sandbox-binary"), std::string::npos) << run.err;
}

TEST(BadInput, a_payload_file_that_does_not_exist_is_named) {
  TempFile catalog(R"({"version": 1, "cases": [{"id": "x.missing", "category": "cpu", "kind": "adversarial",
    "lang": "python", "payload": "python/definitely-missing.py", "expect": {"status": ["timeout"]}}]})");
  auto run = RunCheck({"run", "--sandbox", "null", "--catalog", catalog.path()});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("definitely-missing.py"), std::string::npos) << run.err;
}

// A profile that boots a kernel (a startup allowance) is run once, untimed, before its cases:
// the first runs of a configuration boot and save a snapshot, which no case's bound covers.
// The profile here is the host itself with a log of every invocation.
std::string WarmUpProfile(const std::string& log, int allowance_ms) {
  nlohmann::json p = {
      {"name", "logged"},
      {"binary", "/bin/sh"},
      {"command", {"/bin/sh", "-c", "echo run >> " + log + "; exec \"$@\"", "sh", "{argv...}"}},
      {"paths", "host"},
      {"result", "exit_code"},
      {"startup_allowance_ms", allowance_ms},
      {"unsupported", {"timeout_ms", "cpu_ms", "memory_mib", "cpus", "pids", "storage_mib", "output_bytes", "files"}}};
  return p.dump();
}

TEST(WarmUp, a_booting_profile_runs_its_first_case_once_untimed_before_the_battery) {
  TempDir dir("smolvm-check-warmup");
  for (int allowance : {0, 1000}) {
    const std::string log = fmt::format("{}/runs-{}", dir.path(), allowance);
    TempFile profile(WarmUpProfile(log, allowance));
    auto run = RunCheck({"run", "--sandbox", profile.path(), "--filter", "functional.hello.sh", "--json"});
    ASSERT_TRUE(run.report.is_object()) << run.err;
    EXPECT_EQ(run.report["summary"]["total"], 1);
    EXPECT_EQ(run.report["summary"]["pass"], 1) << Failures(run.report);
    auto logged = ReadTextFile(log, 4096);
    ASSERT_TRUE(logged) << log;
    EXPECT_EQ(std::count(logged->begin(), logged->end(), '\n'), allowance > 0 ? 2 : 1)
        << "startup allowance " << allowance << ": " << *logged;
  }
}

TEST(BadInput, an_unknown_sandbox_name_is_named) {
  auto run = RunCheck({"run", "--sandbox", "no-such-profile"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("no-such-profile"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace smolvm_check
