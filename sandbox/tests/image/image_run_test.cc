// Images built the way users build them (umoci and skopeo, offline, from the host's python3 and
// node), imported through the real CLI and run on the ns backend, and on the vm backend under
// TCG: the image's tree is the root, its config is honoured as docker honours it, and flags
// override it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "api/api_server.h"
#include "api/mcp_client.h"
#include "api/python_sdk_run.h"
#include "smolbox_runner.h"
#include "test_support.h"

namespace smolbox::testing {
namespace {

namespace fs = std::filesystem;

// One build of the test images and one store for the whole suite: building takes seconds.
class ImageRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    images_ = std::make_unique<TempDir>("image-run");
    // Outside /tmp, which the sandbox's storage covers.
    probe_ = "/var/tmp/smolbox-image-probe-XXXXXX";
    if (mkdtemp(probe_.data()) == nullptr) probe_.clear();
    ProgramRun build = RunProgram({"/bin/bash", SMOLBOX_IMAGE_TEST_DIR "/build_test_images.sh", images_->path(),
                                   HelperPath("file_cat"), "1", probe_});
    build_error_ = probe_.empty() ? "mkdtemp in /var/tmp failed"
                   : build.exit_code == 0 ? "" : "build_test_images.sh: " + build.err;
  }
  static void TearDownTestSuite() {
    images_.reset();
    if (!probe_.empty()) fs::remove_all(probe_);
  }

  void SetUp() override {
    ASSERT_EQ(build_error_, "");
    ASSERT_EQ(Smolbox({"image", "import", images_->path() + "/py.tar"}).exit_code, 0);
    ASSERT_EQ(Smolbox({"image", "import", images_->path() + "/layout", "--name", "test/tool:tool"}).exit_code, 0);
  }

  Invocation Smolbox(const std::vector<std::string>& args, const std::vector<std::string>& prefix = {}) {
    return RunSmolbox(args, {"SMOLBOX_IMAGE_STORE=" + store_.path() + "/store"}, 0, prefix);
  }

  virtual std::vector<std::string> Backend() const { return {"--backend", "ns"}; }

  // `smolbox run --json BACKEND OPTIONS [-- COMMAND]`
  Invocation Run(std::vector<std::string> options, const std::vector<std::string>& command = {},
                 const std::vector<std::string>& prefix = {}) {
    std::vector<std::string> args = {"run", "--json"};
    for (const std::string& word : Backend()) args.push_back(word);
    args.insert(args.end(), options.begin(), options.end());
    if (!command.empty()) args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    return Smolbox(args, prefix);
  }

  static std::string Stdout(const Invocation& run) {
    return run.result.is_object() ? run.result.value("stdout", "") : "";
  }

  static inline std::unique_ptr<TempDir> images_;
  static inline std::string probe_;  // the host directory py's /outside links to
  static inline std::string build_error_;
  TempDir store_{"image-store"};
};

TEST_F(ImageRun, python_and_node_run_from_the_image_and_os_release_is_the_images) {
  Invocation py = Run({"--image", "test/py:1"}, {"python3", "-c", "import sys; print(open('/etc/os-release').read() + sys.executable)"});
  ASSERT_EQ(py.exit_code, 0) << py.err << py.out;
  EXPECT_NE(Stdout(py).find("ID=smolbox-test"), std::string::npos) << Stdout(py);
  EXPECT_NE(Stdout(py).find("/usr/bin/python3"), std::string::npos);
  Invocation node = Run({"--image", "test/py:1"}, {"/usr/bin/node", "-e", "console.log(require('fs').readFileSync('/etc/os-release', 'utf8'))"});
  ASSERT_EQ(node.exit_code, 0) << node.err << node.out;
  EXPECT_NE(Stdout(node).find("PRETTY_NAME=\"smolbox test image\""), std::string::npos) << Stdout(node);
  // Not the host's: the image has no /etc/debian_version.
  Invocation host_file = Run({"--image", "test/py:1"}, {"python3", "-c", "import os; print(os.path.exists('/etc/debian_version'))"});
  EXPECT_EQ(Stdout(host_file), "False\n");
}

TEST_F(ImageRun, honours_the_images_cmd_env_working_dir_and_user) {
  Invocation defaults = Run({"--image", "test/py:1"});
  ASSERT_EQ(defaults.exit_code, 0) << defaults.err << defaults.out;
  EXPECT_EQ(Stdout(defaults), "app 42\n");  // Cmd: python3 main.py, in WorkingDir /srv/app
  Invocation seen = Run({"--image", "test/py:1"}, {"python3", "-c", "import os; print(os.getuid(), os.getgid(), os.getcwd(), os.environ['FROM_IMAGE'], os.environ['PATH'])"});
  // User "app" is 1234:1234 in the image's own /etc/passwd.
  EXPECT_EQ(Stdout(seen), "1234 1234 /srv/app yes /usr/bin:/bin\n") << seen.err;
}

TEST_F(ImageRun, env_workdir_and_user_flags_override_the_image) {
  Invocation run = Run({"--image", "test/py:1", "-e", "OVERRIDE=flag", "-w", "/tmp", "--user", "77:88"},
                       {"python3", "-c", "import os; print(os.environ['OVERRIDE'], os.environ['FROM_IMAGE'], os.getcwd(), os.getuid(), os.getgid())"});
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  EXPECT_EQ(Stdout(run), "flag yes /tmp 77 88\n");
  Invocation root = Run({"--image", "test/py:1", "--user", "root"}, {"python3", "-c", "import os; print(os.getuid(), open('/proc/self/status').read().split('NoNewPrivs:')[1].split()[0])"});
  // Root of its user namespace only, and no_new_privs still holds.
  EXPECT_EQ(Stdout(root), "0 1\n") << root.err;
}

TEST_F(ImageRun, the_entrypoint_takes_cmd_or_the_command_as_its_arguments) {
  Invocation defaults = Run({"--image", "test/tool:tool"});
  ASSERT_EQ(defaults.exit_code, 0) << defaults.err << defaults.out;
  EXPECT_EQ(Stdout(defaults), "ID=tool\n");  // Entrypoint /bin/tool, Cmd /etc/os-release
  Invocation args = Run({"--image", "test/tool:tool"}, {"/proc/self/status"});
  ASSERT_EQ(args.exit_code, 0) << args.err;
  // The command replaced Cmd and went to the Entrypoint: uid 4321 is the image's User.
  EXPECT_NE(Stdout(args).find("Uid:\t4321"), std::string::npos) << Stdout(args);
}

// As docker's --entrypoint: the caller's program replaces the image's Entrypoint, the image's
// Cmd goes with it, and "" leaves the command alone.
TEST_F(ImageRun, entrypoint_replaces_the_images_and_drops_its_cmd_as_dockers_does) {
  Invocation tool = Run({"--image", "test/tool:tool", "--entrypoint", "/bin/tool"}, {"/proc/self/status"});
  ASSERT_EQ(tool.exit_code, 0) << tool.err << tool.out;
  EXPECT_NE(Stdout(tool).find("Uid:\t4321"), std::string::npos) << Stdout(tool);
  Invocation alone = Run({"--image", "test/tool:tool", "--entrypoint", ""}, {"/bin/tool", "/etc/os-release"});
  ASSERT_EQ(alone.exit_code, 0) << alone.err << alone.out;
  EXPECT_EQ(Stdout(alone), "ID=tool\n");
  // Neither Entrypoint nor Cmd: there is no command at all.
  Invocation nothing = Run({"--image", "test/tool:tool", "--entrypoint", ""});
  EXPECT_EQ(nothing.exit_code, 125) << nothing.err << nothing.out;
  EXPECT_NE(nothing.err.find("argv: the command is empty"), std::string::npos) << nothing.err;
  Invocation python = Run({"--image", "test/py:1", "--entrypoint", "python3"}, {"-c", "print(7)"});
  ASSERT_EQ(python.exit_code, 0) << python.err << python.out;
  EXPECT_EQ(Stdout(python), "7\n");
  // Cmd (python3 main.py, which prints "app 42") is dropped: python3 reads its empty stdin.
  Invocation no_cmd = Run({"--image", "test/py:1", "--entrypoint", "python3"});
  ASSERT_EQ(no_cmd.exit_code, 0) << no_cmd.err << no_cmd.out;
  EXPECT_EQ(Stdout(no_cmd), "");
  // Without an image config it is the front of the command.
  Invocation host = Smolbox({"run", "--json", "--backend", "ns", "--entrypoint", "/usr/bin/python3", "--", "-c", "print(8)"});
  ASSERT_EQ(host.exit_code, 0) << host.err << host.out;
  EXPECT_EQ(Stdout(host), "8\n");
  // create has no command of its own to put it in front of.
  Invocation create = Smolbox({"create", "box-entrypoint", "--backend", "ns", "--entrypoint", "python3"});
  EXPECT_NE(create.exit_code, 0);
  EXPECT_NE(create.err.find("--entrypoint"), std::string::npos) << create.err;

  ApiServer server({}, "", {"SMOLBOX_IMAGE_STORE=" + store_.path() + "/store"});
  ASSERT_FALSE(server.socket_path().empty()) << server.process().err();
  auto client = server.Client();
  nlohmann::json spec = {{"backend", "ns"}, {"image", "test/py:1"}, {"entrypoint", {"python3"}}, {"argv", {"-c", "print(7)"}}};
  auto [run_code, run] = Post(*client, "/v1/run", spec.dump());
  ASSERT_EQ(run_code, 200) << run.dump();
  EXPECT_EQ(run.value("stdout", ""), "7\n") << run.dump();
  auto [bad_code, bad] = Post(*client, "/v1/run", nlohmann::json{{"image", "test/py:1"}, {"entrypoint", "python3"}}.dump());
  EXPECT_EQ(bad_code, 400) << bad.dump();
  EXPECT_EQ(bad["error"].value("field", ""), "entrypoint") << bad.dump();
  auto [create_code, created] = Post(*client, "/v1/sandboxes", nlohmann::json{{"backend", "ns"}, {"image", "test/py:1"}, {"entrypoint", {"python3"}}}.dump());
  EXPECT_EQ(create_code, 400) << created.dump();
  EXPECT_EQ(created["error"].value("field", ""), "entrypoint") << created.dump();
}

TEST_F(ImageRun, the_layers_whiteout_and_opaque_directory_hold_in_the_sandbox) {
  Invocation run = Run({"--image", "test/py:1"}, {"python3", "-c", "import os; print(os.path.exists('/srv/app/deleted.txt'), sorted(os.listdir('/srv/data')))"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(Stdout(run), "False ['new']\n");
}

TEST_F(ImageRun, storage_volumes_and_limits_work_on_an_image_root) {
  TempDir volume("image-volume");
  volume.Write("in.txt", "from the host\n");
  Invocation run = Run({"--image", "test/py:1", "-v", volume.path() + ":/data:ro", "--mem", "128M"},
                       {"python3", "-c", "open('/work/out', 'w').write('x'); print(open('/data/in.txt').read(), end='');"
                                         "open('/srv/app/x', 'w')"});
  EXPECT_EQ(Stdout(run), "from the host\n") << run.err;
  // The image's tree is read-only.
  EXPECT_NE(run.result.value("stderr", "").find("Read-only file system"), std::string::npos) << run.result.dump();
}

// The image is one read-only overlay at /: none of its directories is a mount point of its own,
// and no host path (the store's) shows in the sandbox's mount table.
TEST_F(ImageRun, the_image_is_one_mount_at_the_root_and_no_host_path_shows) {
  Invocation run = Run({"--image", "test/py:1"}, {"python3", "-c",
                        "for line in open('/proc/self/mountinfo'): f = line.split(); print(f[4], f[f.index('-') + 1])"});
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  std::string table = Stdout(run);
  EXPECT_EQ(table.substr(0, table.find('\n')), "/ overlay") << table;
  for (const char* image_dir : {"/usr ", "/etc ", "/srv ", "/srv/app ", "/bin "}) {
    EXPECT_EQ(table.find(std::string("\n") + image_dir), std::string::npos) << image_dir << " in\n" << table;
  }
  Invocation raw = Run({"--image", "test/py:1"}, {"cat", "/proc/self/mountinfo"});
  EXPECT_EQ(raw.exit_code, 0) << raw.err;
  EXPECT_EQ(Stdout(raw).find(store_.path()), std::string::npos) << Stdout(raw);
}

// Mount points are made where the sandbox will see them: the image's absolute /outside -> PROBE
// leads to the image's own PROBE, never to the host's.
TEST_F(ImageRun, a_mount_point_through_an_image_symlink_stays_in_the_image) {
  TempDir volume("image-volume");
  volume.Write("in.txt", "through the link\n");
  Invocation run = Run({"--image", "test/py:1", "-v", volume.path() + ":/outside:ro"}, {"cat", probe_ + "/in.txt"});
  EXPECT_EQ(run.exit_code, 0) << run.err << run.out;
  EXPECT_EQ(Stdout(run), "through the link\n") << run.result.dump();
  EXPECT_TRUE(fs::is_empty(probe_));
  // Deeper in the image, where the image's own ids own the directories, it is a clear error.
  Invocation deeper = Run({"--image", "test/py:1", "-v", volume.path() + ":/srv/app/in:ro"}, {"true"});
  EXPECT_EQ(deeper.exit_code, 125);
  EXPECT_NE(deeper.result.value("error", "").find("/srv/app/in: cannot be made: its directory in the sandbox's "
                                                   "root is not writable"), std::string::npos) << deeper.out;
}

// With egress the image's resolv.conf, a link into a /run it lacks, is replaced by one naming
// the gateway's resolver. smolbox runs in a network namespace of its own: nothing dials out.
TEST_F(ImageRun, with_egress_the_images_resolv_conf_names_the_gateway) {
  Invocation run = Run({"--image", "test/py:1", "--net"}, {"cat", "/etc/resolv.conf"},
                       {"/usr/bin/unshare", "--net", "--"});
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  EXPECT_EQ(Stdout(run), "nameserver 127.0.0.1\n");
  Invocation without = Run({"--image", "test/py:1"}, {"python3", "-c", "import os; print(os.readlink('/etc/resolv.conf'))"});
  EXPECT_EQ(Stdout(without), "../run/systemd/resolve/stub-resolv.conf\n") << without.err;
}

TEST_F(ImageRun, an_image_never_imported_is_a_clear_error_naming_import) {
  Invocation run = Smolbox({"run", "--backend", "ns", "--image", "never/imported:1", "--", "python3", "-c", "1"});
  EXPECT_EQ(run.exit_code, 125);
  EXPECT_NE(run.err.find("no image \"never/imported:1\""), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("smolbox image import"), std::string::npos) << run.err;
}

TEST_F(ImageRun, a_registry_name_never_imported_is_refused_without_a_pull) {
  // In a network namespace of its own with nothing in it: a pull could not even start, and the
  // refusal must not depend on trying.
  ProgramRun run = RunProgram({"/usr/bin/env", "SMOLBOX_IMAGE_STORE=" + store_.path() + "/store", "/usr/bin/unshare",
                               "--net", SmolboxPath(), "run", "--backend", "ns", "--image",
                               "docker.io/library/python:3.12", "--", "python3", "-c", "1"});
  EXPECT_EQ(run.exit_code, 125) << run.err;
  EXPECT_NE(run.err.find("no image \"docker.io/library/python:3.12\""), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("images are never pulled"), std::string::npos) << run.err;
}

TEST_F(ImageRun, a_removed_image_is_no_longer_listed_and_its_layers_are_freed) {
  Invocation listed = Smolbox({"image", "ls"});
  ASSERT_EQ(listed.exit_code, 0);
  EXPECT_NE(listed.out.find("test/py"), std::string::npos) << listed.out;
  std::string blobs = store_.path() + "/store/blobs/sha256";
  size_t before = 0, after = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(blobs)) ++before;
  Invocation removed = Smolbox({"image", "rm", "test/py:1"});
  ASSERT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_NE(removed.out.find("deleted: sha256:"), std::string::npos) << removed.out;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(blobs)) ++after;
  EXPECT_EQ(after, before - 3);  // py's three layers; tool's stays
  listed = Smolbox({"image", "ls"});
  EXPECT_EQ(listed.out.find("test/py"), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("test/tool"), std::string::npos) << listed.out;
  Invocation run = Run({"--image", "test/py:1"}, {"python3", "-c", "1"});
  EXPECT_EQ(run.exit_code, 125);
}

TEST_F(ImageRun, a_persistent_sandbox_runs_its_execs_in_the_image) {
  std::string name = "img-" + RandomToken().substr(7, 8);
  Invocation created = Smolbox({"create", name, "--backend", "ns", "--image", "test/py:1"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  Invocation exec = Smolbox({"exec", name, "--json", "--", "python3", "-c", "import os; print(os.getuid(), os.getcwd(), open('/etc/os-release').read().split()[-1])"});
  Smolbox({"rm", "-f", name});
  EXPECT_EQ(Stdout(exec), "1234 /srv/app ID=smolbox-test\n") << exec.err << exec.out;
}

TEST_F(ImageRun, a_spec_file_names_a_store_image_as_the_flag_does) {
  std::string spec = store_.Write("job.json", R"json({"image": "test/py:1", "argv": ["python3", "-c", "import os; print(os.getuid())"]})json");
  Invocation run = Smolbox({"run", "--json", "--backend", "ns", "--spec", spec});
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  EXPECT_EQ(Stdout(run), "1234\n");
}

// The API resolves a store name by the step the CLI takes: a run and a sandbox's exec see the
// image's tree and config, as `smolbox run --image` and `smolbox create --image` do.
TEST_F(ImageRun, the_api_runs_a_store_image_and_makes_sandboxes_of_it_as_the_cli_does) {
  ApiServer server({}, "", {"SMOLBOX_IMAGE_STORE=" + store_.path() + "/store"});
  ASSERT_FALSE(server.socket_path().empty()) << server.process().err();
  auto client = server.Client();
  const std::string code = "import os; print(os.getuid(), os.getcwd(), os.environ['FROM_IMAGE'], open('/etc/os-release').read().split()[-1])";
  nlohmann::json spec = {{"backend", "ns"}, {"image", "test/py:1"}, {"argv", {"python3", "-c", code}}};
  auto [run_code, run] = Post(*client, "/v1/run", spec.dump());
  ASSERT_EQ(run_code, 200) << run.dump();
  Invocation cli = Run({"--image", "test/py:1"}, {"python3", "-c", code});
  ASSERT_EQ(cli.exit_code, 0) << cli.err << cli.out;
  EXPECT_EQ(run.value("stdout", ""), "1234 /srv/app yes ID=smolbox-test\n") << run.dump();
  EXPECT_EQ(run.value("stdout", ""), Stdout(cli));
  // The Python SDK's image= and the MCP tools' image, the same way.
  std::string sdk_error;
  nlohmann::json sdk = RunThroughPythonSdk(server.address(), spec, &sdk_error);
  EXPECT_EQ(sdk.is_object() ? sdk.value("stdout", "") : "", Stdout(cli)) << sdk_error;
  McpClient mcp({}, {"SMOLBOX_IMAGE_STORE=" + store_.path() + "/store"});
  nlohmann::json tool_run = mcp.Call("run_code", {{"image", "test/py:1"}, {"code", code}});
  EXPECT_EQ(tool_run.value("structuredContent", nlohmann::json::object()).value("stdout", ""), Stdout(cli))
      << tool_run.dump();
  nlohmann::json tool_box = mcp.Call("create_sandbox", {{"image", "test/py:1"}});
  std::string tool_id = tool_box.value("structuredContent", nlohmann::json::object()).value("sandbox_id", "");
  ASSERT_FALSE(tool_id.empty()) << tool_box.dump();
  nlohmann::json tool_exec = mcp.Call("exec", {{"sandbox_id", tool_id}, {"code", code}});
  EXPECT_EQ(tool_exec.value("structuredContent", nlohmann::json::object()).value("stdout", ""), Stdout(cli))
      << tool_exec.dump();
  // With no command, the image's Cmd runs, as it does through the CLI.
  auto [cmd_code, cmd] = Post(*client, "/v1/run", nlohmann::json{{"backend", "ns"}, {"image", "test/py:1"}}.dump());
  EXPECT_EQ(cmd_code, 200) << cmd.dump();
  EXPECT_EQ(cmd.value("stdout", ""), "app 42\n") << cmd.dump();

  auto [create_code, created] = Post(*client, "/v1/sandboxes", nlohmann::json{{"backend", "ns"}, {"image", "test/py:1"}}.dump());
  ASSERT_EQ(create_code, 201) << created.dump();
  std::string id = created.value("id", "");
  auto exec = client->Post(("/v1/sandboxes/" + id + "/exec").c_str(), nlohmann::json{{"argv", {"python3", "-c", code}}}.dump(), "application/json");
  ASSERT_TRUE(exec);
  EXPECT_EQ(exec->status, 200) << exec->body;
  std::string out;
  for (const auto& line : NdjsonLines(exec->body)) {
    if (line.value("type", "") == "stdout") out += line.value("data", "");
  }
  EXPECT_EQ(out, "1234 /srv/app yes ID=smolbox-test\n") << exec->body;
  auto removed = client->Delete(("/v1/sandboxes/" + id).c_str());
  ASSERT_TRUE(removed);
  EXPECT_EQ(removed->status / 100, 2) << removed->body;

  // A name the store does not hold is still refused, naming the field and the import.
  auto [missing_code, missing] = Post(*client, "/v1/run", nlohmann::json{{"image", "test/absent:1"}, {"argv", {"true"}}}.dump());
  EXPECT_EQ(missing_code, 400) << missing.dump();
  EXPECT_EQ(missing["error"].value("field", ""), "image") << missing.dump();
  EXPECT_NE(missing.dump().find("smolbox image import"), std::string::npos) << missing.dump();
}

// An image keeps its own trust store, not the host's; --ca-bundle's certificates follow its
// bundle, which is read in the image's root: its absolute link leads to the image's file. The
// image's Env names its own bundle in SSL_CERT_FILE, which the caller's bundle overrides.
TEST_F(ImageRun, an_image_keeps_its_own_trust_store_and_a_ca_bundle_joins_it) {
  const std::string code = "import os; print(open('/etc/ssl/certs/ca-certificates.crt').read(), end=''); print(os.environ.get('SSL_CERT_FILE'))";
  Invocation own = Run({"--image", "test/py:1"}, {"python3", "-c", code});
  ASSERT_EQ(own.exit_code, 0) << own.err << own.out;
  EXPECT_EQ(Stdout(own), "# the image's own trust store\n/etc/ssl/certs/ca-certificates.crt\n");
  std::string ca = store_.path() + "/ca.pem";
  ProgramRun made = RunProgram({"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                                "-nodes", "-days", "1", "-subj", "/CN=image test CA", "-keyout", store_.path() + "/ca-key.pem",
                                "-out", ca});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  Invocation joined = Run({"--image", "test/py:1", "--ca-bundle", ca},
                          {"python3", "-c", "import os; print(open(os.environ['SSL_CERT_FILE']).read(), end='')"});
  ASSERT_EQ(joined.exit_code, 0) << joined.err << joined.out;
  EXPECT_EQ(Stdout(joined), "# the image's own trust store\n" + ReadFileOrEmpty(ca)) << joined.err;
}

TEST_F(ImageRun, bad_import_flags_are_errors_naming_the_flag) {
  Invocation files = Smolbox({"image", "import", images_->path() + "/py.tar", "--max-files", "0"});
  EXPECT_EQ(files.exit_code, 125);
  EXPECT_NE(files.err.find("--max-files: must be a positive integer"), std::string::npos) << files.err;
  Invocation name = Smolbox({"image", "import", images_->path() + "/py.tar", "--name", "Bad Name"});
  EXPECT_EQ(name.exit_code, 125);
  EXPECT_NE(name.err.find("--name: \"Bad Name\" is not an image name"), std::string::npos) << name.err;
  // Into a store that lacks the image, whose layers must then be unpacked (the suite's store
  // holds it already, and would only read the tar's manifest and config).
  TempDir empty("image-store-empty");
  Invocation bomb = RunSmolbox({"image", "import", images_->path() + "/py.tar", "--name", "test/small:1", "--max-size", "1M"},
                               {"SMOLBOX_IMAGE_STORE=" + empty.path() + "/store"});
  EXPECT_EQ(bomb.exit_code, 125);
  EXPECT_NE(bomb.err.find("more than 1048576 bytes"), std::string::npos) << bomb.err;
  Invocation listed = RunSmolbox({"image", "ls"}, {"SMOLBOX_IMAGE_STORE=" + empty.path() + "/store"});
  EXPECT_EQ(listed.out.find("test/small"), std::string::npos) << listed.out;
  EXPECT_NE(Smolbox({"image", "ls"}).out.find("test/py"), std::string::npos);
}

TEST_F(ImageRun, an_import_killed_midway_leaves_what_the_next_import_sweeps) {
  ASSERT_EQ(Smolbox({"image", "rm", "test/py:1"}).exit_code, 0);
  std::string store = store_.path() + "/store";
  for (int delay_ms : {50, 200, 400}) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("SMOLBOX_IMAGE_STORE", store.c_str(), 1);
      execl(SmolboxPath().c_str(), "smolbox", "image", "import", (images_->path() + "/py.tar").c_str(), nullptr);
      _exit(127);
    }
    usleep(delay_ms * 1000);
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
  }
  // Whatever the kills left, the next import sweeps it, and the image comes in whole.
  ASSERT_EQ(Smolbox({"image", "import", images_->path() + "/py.tar"}).exit_code, 0);
  EXPECT_TRUE(fs::is_empty(store + "/tmp"));
  size_t blobs = 0;
  for (const auto& entry : fs::directory_iterator(store + "/blobs/sha256")) {
    EXPECT_FALSE(entry.path().filename().string().starts_with(".tmp-")) << entry.path();
    ++blobs;
  }
  EXPECT_EQ(blobs, 4u);  // py's three layers and tool's one
  EXPECT_EQ(Stdout(Run({"--image", "test/py:1"})), "app 42\n");
}

// The same images in a microVM under TCG: the image becomes the guest's disk (one erofs per
// image), with its own boot snapshot.
class ImageRunVm : public ImageRun {
 protected:
  std::vector<std::string> Backend() const override { return {"--backend", "vm", "--accel", "tcg"}; }
};

TEST_F(ImageRunVm, python_and_node_run_from_the_image_with_its_config) {
  Invocation defaults = Run({"--image", "test/py:1"});
  ASSERT_EQ(defaults.exit_code, 0) << defaults.err << defaults.out;
  EXPECT_EQ(Stdout(defaults), "app 42\n");
  Invocation py = Run({"--image", "test/py:1", "-e", "OVERRIDE=flag"},
                      {"python3", "-c", "import os; print(open('/etc/os-release').read().split()[-1], os.getuid(), os.getgid(), os.getcwd(), "
                                        "os.environ['FROM_IMAGE'], os.environ['OVERRIDE'], os.path.exists('/srv/app/deleted.txt'), os.listdir('/srv/data'), "
                                        "[(f[4], f[f.index('-') + 1]) for f in map(str.split, open('/proc/self/mountinfo')) if f[4] in ('/', '/srv', '/usr')])"});
  ASSERT_EQ(py.exit_code, 0) << py.err << py.out;
  // The guest's workload root is one overlay of the image's erofs, as on ns.
  EXPECT_EQ(Stdout(py), "ID=smolbox-test 1234 1234 /srv/app yes flag False ['new'] [('/', 'overlay')]\n");
  Invocation node = Run({"--image", "test/py:1"}, {"/usr/bin/node", "-e", "console.log(require('fs').readFileSync('/etc/os-release', 'utf8').length > 0, process.getuid())"});
  ASSERT_EQ(node.exit_code, 0) << node.err << node.out;
  EXPECT_EQ(Stdout(node), "true 1234\n");
}

TEST_F(ImageRunVm, the_entrypoint_runs_and_a_rootfs_directory_is_refused_clearly) {
  Invocation tool = Run({"--image", "test/tool:tool"});
  ASSERT_EQ(tool.exit_code, 0) << tool.err << tool.out;
  EXPECT_EQ(Stdout(tool), "ID=tool\n");
  TempDir rootfs("image-rootfs");
  Invocation dir = Smolbox({"run", "--backend", "vm", "--accel", "tcg", "--image", rootfs.path(), "--", "/bin/true"});
  EXPECT_EQ(dir.exit_code, 125);
  EXPECT_NE(dir.err.find("a rootfs directory runs on the ns backend only"), std::string::npos) << dir.err;
}

}  // namespace
}  // namespace smolbox::testing
