// smolbox oci called as engines call runc: create, start, state, kill, delete, run, exec, ps and
// features, with the container's stdio in files (a create's container keeps them, as runc's).
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "oci_bundle.h"
#include "smolbox_runner.h"

extern char** environ;

namespace smolbox::testing {
namespace {

using nlohmann::json;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct OciCall {
  int exit_code = -1;
  std::string err;
};

// `smolbox-oci --root ROOT --log LOG --log-format json ARGS...` with stdin from /dev/null and
// stdout to out_file (the container's, for create and run), stderr to a file of its own.
class OciRuntime {
 public:
  OciCall Call(const std::vector<std::string>& args,
               const std::string& out_file = "/dev/null") const {
    pid_t pid = Spawn(args, out_file);
    OciCall call;
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return call;
    call.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    call.err = ReadFile(dir_.path() + "/stderr");
    return call;
  }

  // The same call, not waited for: its pid, or -1.
  pid_t Spawn(const std::vector<std::string>& args,
              const std::string& out_file = "/dev/null") const {
    std::vector<std::string> argv = {SmolboxPath() + "-oci", "--root", root(), "--log", log(),
                                     "--log-format",         "json"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> pointers;
    for (auto& arg : argv) pointers.push_back(arg.data());
    pointers.push_back(nullptr);
    std::string err_file = dir_.path() + "/stderr";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, out_file.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                     0600);
    posix_spawn_file_actions_addopen(&actions, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0600);
    pid_t pid = -1;
    int spawned = posix_spawn(&pid, pointers[0], &actions, nullptr, pointers.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    return spawned == 0 ? pid : -1;
  }

  json State(const std::string& id) const {
    std::string out = dir_.path() + "/state.out";
    std::filesystem::remove(out);
    if (Call({"state", id}, out).exit_code != 0) return json();
    return json::parse(ReadFile(out), nullptr, false);
  }

  std::string root() const { return dir_.path() + "/root"; }
  std::string log() const { return dir_.path() + "/log.json"; }
  std::string file(const std::string& name) const { return dir_.path() + "/" + name; }

 private:
  TempDir dir_{"oci-runtime"};
};

bool ProcessGone(pid_t pid) {
  // A monitor that has exited is a zombie of init (create's child, orphaned) until it is reaped.
  std::string stat = ReadFile(fmt::format("/proc/{}/stat", pid));
  return stat.empty() || stat.find(") Z ") != std::string::npos;
}

TEST(OciRuntime, a_container_goes_through_created_running_and_stopped_as_the_spec_says) {
  OciRuntime runtime;
  OciBundle bundle;
  std::string token = RandomToken();
  bundle.config["process"]["args"] = {"/bin/sh", "-c", "echo started; sleep 600; :", token};
  bundle.Save();
  std::string out = runtime.file("container.out");
  auto created = runtime.Call(
      {"create", "--bundle", bundle.path(), "--pid-file", runtime.file("pid"), "c1"}, out);
  ASSERT_EQ(created.exit_code, 0) << created.err;
  json state = runtime.State("c1");
  EXPECT_EQ(state["status"], "created") << state.dump();
  EXPECT_EQ(state["id"], "c1");
  EXPECT_EQ(state["bundle"], bundle.path());
  pid_t pid = std::stoi(ReadFile(runtime.file("pid")));
  EXPECT_EQ(state["pid"], pid);
  EXPECT_EQ(ReadFile(out), "") << "the process ran before start";

  ASSERT_EQ(runtime.Call({"start", "c1"}).exit_code, 0);
  EXPECT_TRUE(WaitUntil([&] { return ReadFile(out) == "started\n"; }, std::chrono::seconds(30)))
      << ReadFile(out);
  EXPECT_EQ(runtime.State("c1")["status"], "running");
  EXPECT_GT(CountProcessesWith(token), 0) << "the shell stays, with the token as its $0";
  auto second_start = runtime.Call({"start", "c1"});
  EXPECT_EQ(second_start.exit_code, 1);
  EXPECT_NE(second_start.err.find("cannot start a container that is running"), std::string::npos)
      << second_start.err;

  // ps lists the container's processes (host pids): its agent, and the workload's shell and sleep.
  std::string ps = runtime.file("ps.out");
  ASSERT_EQ(runtime.Call({"ps", "--format", "json", "c1"}, ps).exit_code, 0);
  bool sleeper_listed = false;
  for (const auto& listed : json::parse(ReadFile(ps))) {
    sleeper_listed |=
        ReadFile(fmt::format("/proc/{}/cmdline", listed.get<int>())).starts_with("sleep");
  }
  EXPECT_TRUE(sleeper_listed) << ReadFile(ps);

  auto refused = runtime.Call({"delete", "c1"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("running"), std::string::npos) << refused.err;
  ASSERT_EQ(runtime.Call({"kill", "c1", "15"}).exit_code, 0);
  EXPECT_TRUE(WaitUntil([&] { return runtime.State("c1")["status"] == "stopped"; },
                        std::chrono::seconds(30)));
  EXPECT_TRUE(WaitUntil([&] { return ProcessGone(pid); }, std::chrono::seconds(30)));
  EXPECT_EQ(runtime.Call({"kill", "c1", "KILL"}).exit_code, 1)
      << "a stopped container takes no signal";
  ASSERT_EQ(runtime.Call({"delete", "c1"}).exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(runtime.root() + "/c1"));
  auto gone = runtime.Call({"state", "c1"});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_NE(gone.err.find("does not exist"), std::string::npos) << gone.err;
  // As runc: deleting a container that is gone is an error, unless forced.
  EXPECT_EQ(runtime.Call({"delete", "c1"}).exit_code, 1);
  EXPECT_EQ(runtime.Call({"delete", "--force", "c1"}).exit_code, 0);
  EXPECT_EQ(CountProcessesWith(token), 0);
}

TEST(OciRuntime, run_waits_for_the_process_and_exits_with_its_status) {
  OciRuntime runtime;
  OciBundle bundle;
  bundle.config["process"]["args"] = {"/bin/sh", "-c",
                                      "echo $(hostname) $(id -u) $(cat /etc/shadow); exit 7"};
  bundle.Save();
  std::string out = runtime.file("run.out");
  auto run = runtime.Call({"run", "--bundle", bundle.path(), "r1"}, out);
  EXPECT_EQ(run.exit_code, 7) << run.err;
  // The image's root-only file is the sandbox root's to read: the image is idmapped to it.
  EXPECT_EQ(ReadFile(out), "runc 0 root-only\n");
  EXPECT_FALSE(std::filesystem::exists(runtime.root() + "/r1")) << "run deletes what it created";
}

TEST(OciRuntime, a_read_only_root_refuses_writes_and_a_writable_one_takes_them) {
  OciRuntime runtime;
  OciBundle bundle;
  bundle.config["process"]["args"] = {"/bin/sh", "-c", "touch /made && echo wrote"};
  bundle.Save();
  std::string out = runtime.file("ro.out");
  EXPECT_NE(runtime.Call({"run", "--bundle", bundle.path(), "ro"}, out).exit_code, 0);
  EXPECT_EQ(ReadFile(out), "");
  bundle.config["root"]["readonly"] = false;
  bundle.Save();
  std::string rw = runtime.file("rw.out");
  EXPECT_EQ(runtime.Call({"run", "--bundle", bundle.path(), "rw"}, rw).exit_code, 0);
  EXPECT_EQ(ReadFile(rw), "wrote\n");
  EXPECT_FALSE(std::filesystem::exists(bundle.rootfs() + "/made"))
      << "a write reached the engine's rootfs";
}

// The small files an engine binds (podman's /run/.containerenv, everyone's /etc/hosts) are the
// root's own copies: readable, read-only, and no mount that names a host path.
TEST(OciRuntime, an_engines_small_files_are_copies_in_the_root_and_no_host_mount) {
  OciRuntime runtime;
  OciBundle bundle;
  std::string token = RandomToken();
  WriteFile(runtime.file("containerenv"), "engine=\"podman\"\n" + token + "\n");
  WriteFile(runtime.file("hosts"), "127.0.0.1 localhost\n");
  bundle.config["mounts"].push_back({{"destination", "/run/.containerenv"},
                                     {"type", "bind"},
                                     {"source", runtime.file("containerenv")},
                                     {"options", {"bind", "ro"}}});
  bundle.config["mounts"].push_back({{"destination", "/etc/hosts"},
                                     {"type", "bind"},
                                     {"source", runtime.file("hosts")},
                                     {"options", {"bind", "rw"}}});
  bundle.config["process"]["args"] = {
      "/bin/sh", "-c",
      "cat /run/.containerenv /etc/hosts; grep -c -e containerenv -e hosts -e " + token +
          " /proc/self/mountinfo; echo x >> /etc/hosts || echo read-only"};
  bundle.Save();
  std::string out = runtime.file("files.out");
  auto run = runtime.Call({"run", "--bundle", bundle.path(), "f1"}, out);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(ReadFile(out), "engine=\"podman\"\n" + token + "\n127.0.0.1 localhost\n0\nread-only\n");
  EXPECT_EQ(ReadFile(runtime.file("hosts")), "127.0.0.1 localhost\n");
}

TEST(OciRuntime, a_tmpfs_is_an_empty_writable_directory_held_by_the_storage_limit) {
  OciRuntime runtime;
  OciBundle bundle;
  bundle.config["mounts"].push_back(
      {{"destination", "/run"}, {"type", "tmpfs"}, {"source", "tmpfs"}, {"options", {"size=1g"}}});
  bundle.config["annotations"] = {{"io.smolbox.storage-mib", "16"}};
  // 8 MiB fits in a storage of 16; 32 more does not, whatever the tmpfs's own size says.
  bundle.config["process"]["args"] = {
      "/bin/sh", "-c",
      "ls -A /run; dd if=/dev/zero of=/run/a bs=1M count=8 2>/dev/null && echo fits; "
      "dd if=/dev/zero of=/run/b bs=1M count=32 2>/dev/null || echo capped"};
  bundle.Save();
  std::string out = runtime.file("tmpfs.out");
  EXPECT_EQ(runtime.Call({"run", "--bundle", bundle.path(), "t1"}, out).exit_code, 0);
  EXPECT_EQ(ReadFile(out), "fits\ncapped\n");
}

// The CPU weight of the cgroup that holds the process whose command line has token, as v1's
// cpu.shares gives it (v2's cpu.weight converted back is not exact, so it is read as it is):
// "shares N" or "weight N", or "" when neither is found.
std::string CpuWeightOfProcessWith(const std::string& token) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string cmdline = ReadFile(entry.path().string() + "/cmdline");
    if (cmdline.find(token) == std::string::npos || !cmdline.starts_with("/bin/sh")) continue;
    std::istringstream lines(ReadFile(entry.path().string() + "/cgroup"));
    for (std::string line; std::getline(lines, line);) {
      size_t first = line.find(':'), second = line.find(':', first + 1);
      std::string controllers = line.substr(first + 1, second - first - 1);
      std::string path = line.substr(second + 1);
      if (controllers.empty()) {
        for (const char* top : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
          std::string weight = ReadFile(std::string(top) + path + "/cpu.weight");
          if (!weight.empty()) return "weight " + weight.substr(0, weight.find('\n'));
        }
      } else if (("," + controllers + ",").find(",cpu,") != std::string::npos) {
        std::string shares = ReadFile("/sys/fs/cgroup/" + controllers + path + "/cpu.shares");
        if (!shares.empty()) return "shares " + shares.substr(0, shares.find('\n'));
      }
    }
  }
  return "";
}

TEST(OciRuntime, the_cpu_shares_weigh_the_containers_cgroup) {
  OciRuntime runtime;
  OciBundle bundle;
  std::string token = RandomToken();
  bundle.config["linux"]["resources"] = {{"cpu", {{"shares", 512}}}};
  bundle.config["process"]["args"] = {"/bin/sh", "-c", "sleep 600; :", token};
  bundle.Save();
  ASSERT_EQ(runtime.Call({"run", "--detach", "--bundle", bundle.path(), "w1"}).exit_code, 0);
  std::string weight;
  EXPECT_TRUE(WaitUntil([&] { return !(weight = CpuWeightOfProcessWith(token)).empty(); },
                        std::chrono::seconds(30)));
  // runc's conversion for v2: 1 + (512 - 2) * 9999 / 262142.
  EXPECT_TRUE(weight == "shares 512" || weight == "weight 20") << weight;
  EXPECT_EQ(runtime.Call({"delete", "--force", "w1"}).exit_code, 0);
}

TEST(OciRuntime, the_configs_limits_hold_in_the_container) {
  OciRuntime runtime;
  OciBundle bundle;
  bundle.config["root"]["readonly"] = false;
  bundle.config["linux"]["resources"] = {{"memory", {{"limit", 32 << 20}}},
                                         {"pids", {{"limit", 20}}}};
  // 64 MiB held in one shell variable, past the 32 MiB limit.
  bundle.config["process"]["args"] = {
      "/bin/sh", "-c", "x=$(head -c 67108864 /dev/zero | tr '\\0' a); echo survived"};
  bundle.Save();
  std::string memory = runtime.file("memory.out");
  EXPECT_EQ(runtime.Call({"run", "--bundle", bundle.path(), "mem"}, memory).exit_code, 137);
  EXPECT_EQ(ReadFile(memory), "");
  // Forty sleepers past a limit of twenty processes: the shell is refused a fork.
  bundle.config["process"]["args"] = {
      "/bin/sh", "-c", "for i in $(seq 40); do sleep 30 & done 2>/dev/null; echo spawned"};
  bundle.Save();
  std::string pids = runtime.file("pids.out");
  runtime.Call({"run", "--bundle", bundle.path(), "pids"}, pids);
  EXPECT_NE(ReadFile(pids), "spawned\n") << "40 processes started under a limit of 20";
}

TEST(OciRuntime, a_bad_config_is_an_error_on_stderr_and_in_the_json_log_and_leaves_nothing) {
  OciRuntime runtime;
  OciBundle bundle;
  bundle.config["linux"]["resources"] = {{"memory", {{"limit", 1024}}}};
  bundle.Save();
  auto created = runtime.Call({"create", "--bundle", bundle.path(), "bad"});
  EXPECT_EQ(created.exit_code, 1);
  EXPECT_NE(created.err.find("linux.resources.memory.limit"), std::string::npos) << created.err;
  std::string log = ReadFile(runtime.log());
  std::string last = log.substr(log.rfind('\n', log.size() - 2) + 1);
  json line = json::parse(last, nullptr, false);
  EXPECT_EQ(line.value("level", ""), "error") << log;
  EXPECT_NE(line.value("msg", "").find("linux.resources.memory.limit"), std::string::npos) << log;
  EXPECT_FALSE(line.value("time", "").empty());
  EXPECT_FALSE(std::filesystem::exists(runtime.root() + "/bad"));
  bundle.config = "not a config";
  bundle.Save();
  auto malformed = runtime.Call({"create", "--bundle", bundle.path(), "bad"});
  EXPECT_EQ(malformed.exit_code, 1);
  EXPECT_NE(malformed.err.find("config.json"), std::string::npos) << malformed.err;
  auto bad_id = runtime.Call({"create", "--bundle", bundle.path(), "../escape"});
  EXPECT_EQ(bad_id.exit_code, 1);
  EXPECT_NE(bad_id.err.find("container id"), std::string::npos) << bad_id.err;
  EXPECT_FALSE(std::filesystem::exists(runtime.root() + "/../escape"));
}

TEST(OciRuntime, a_create_that_was_killed_on_the_way_is_swept_by_the_next_call) {
  OciRuntime runtime;
  // What a create killed before its monitor reported leaves: its directory, still "creating",
  // naming a monitor that is gone.
  std::filesystem::create_directories(runtime.root() + "/half");
  std::ofstream(runtime.root() + "/half/state.json")
      << R"({"id":"half","bundle":"/x","status":"creating","pid":999999999,"pid_start":1,"created":"","annotations":{}})";
  auto state = runtime.Call({"state", "half"});
  EXPECT_EQ(state.exit_code, 1);
  EXPECT_NE(state.err.find("does not exist"), std::string::npos) << state.err;
  EXPECT_FALSE(std::filesystem::exists(runtime.root() + "/half"));
  // And a create of the same id goes ahead.
  OciBundle bundle;
  bundle.config["process"]["args"] = {"/bin/true"};
  bundle.Save();
  std::filesystem::create_directories(runtime.root() + "/half");
  auto created = runtime.Call({"create", "--bundle", bundle.path(), "half"});
  EXPECT_EQ(created.exit_code, 0) << created.err;
  EXPECT_EQ(runtime.Call({"delete", "--force", "half"}).exit_code, 0);
}

// The engine killed while its create is under way (here, while a prestart hook runs, before the
// sandbox starts): the monitor finds no one to report to, and leaves nothing.
TEST(OciRuntime, a_create_whose_engine_is_killed_midway_leaves_nothing) {
  OciRuntime runtime;
  OciBundle bundle;
  std::string marker = runtime.file("hook-ran");
  std::string hook = runtime.file("slow-hook.sh");
  WriteFile(hook, "#!/bin/sh\ntouch " + marker + "\nsleep 2\n");
  chmod(hook.c_str(), 0755);
  bundle.config["hooks"] = {{"prestart", {{{"path", hook}}}}};
  bundle.Save();
  size_t runs_before = CountEntries("/run/smolbox/runs");
  pid_t create = runtime.Spawn({"create", "--bundle", bundle.path(), "killed"});
  ASSERT_GT(create, 0);
  ASSERT_TRUE(WaitUntil([&] { return std::filesystem::exists(marker); }, std::chrono::seconds(30)));
  kill(create, SIGKILL);
  waitpid(create, nullptr, 0);
  EXPECT_TRUE(WaitUntil([&] { return !std::filesystem::exists(runtime.root() + "/killed"); },
                        std::chrono::seconds(30)))
      << "the container's directory outlived its create";
  EXPECT_TRUE(WaitUntil([&] { return CountEntries("/run/smolbox/runs") <= runs_before; },
                        std::chrono::seconds(30)))
      << "the sandbox's run directory outlived its create";
  EXPECT_EQ(runtime.Call({"state", "killed"}).exit_code, 1);
}

// A terminal: the pty's master goes to the console socket, and the process's output comes out of
// it.
TEST(OciRuntime, with_a_terminal_the_output_comes_through_the_pty_sent_to_the_console_socket) {
  OciRuntime runtime;
  OciBundle bundle;
  bundle.config["process"]["terminal"] = true;
  bundle.config["process"]["args"] = {"/bin/sh", "-c", "echo through-the-pty"};
  bundle.Save();
  std::string socket_path = runtime.file("console.sock");
  int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path.c_str(), sizeof address.sun_path - 1);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  auto refused = runtime.Call({"create", "--bundle", bundle.path(), "tty"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("--console-socket"), std::string::npos) << refused.err;
  auto created =
      runtime.Call({"create", "--bundle", bundle.path(), "--console-socket", socket_path, "tty"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  int connection = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(connection, 0);
  char name[64];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  iovec payload{name, sizeof name};
  msghdr message{};
  message.msg_iov = &payload;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  ASSERT_GT(recvmsg(connection, &message, 0), 0);
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  ASSERT_NE(header, nullptr);
  int master = -1;
  std::memcpy(&master, CMSG_DATA(header), sizeof master);
  ASSERT_EQ(runtime.Call({"start", "tty"}).exit_code, 0);
  std::string seen;
  EXPECT_TRUE(WaitUntil(
      [&] {
        char buffer[256];
        fcntl(master, F_SETFL, O_NONBLOCK);
        for (ssize_t n; (n = read(master, buffer, sizeof buffer)) > 0;)
          seen.append(buffer, size_t(n));
        return seen.find("through-the-pty") != std::string::npos;
      },
      std::chrono::seconds(30)))
      << seen;
  EXPECT_TRUE(WaitUntil([&] { return runtime.State("tty")["status"] == "stopped"; },
                        std::chrono::seconds(30)));
  EXPECT_EQ(runtime.Call({"delete", "tty"}).exit_code, 0);
  close(master);
  close(connection);
  close(listener);
}

// The hooks run on the host with the state on their stdin; a prestart hook sets up the network
// namespace the runtime made for the container, as docker's libnetwork-setkey does.
TEST(OciRuntime, hooks_run_on_the_host_and_set_up_the_containers_own_network_namespace) {
  OciRuntime runtime;
  OciBundle bundle;
  std::string record = runtime.file("record.sh");
  WriteFile(record, "#!/bin/sh\ncat > \"$1\"\n");
  chmod(record.c_str(), 0755);
  std::string setkey = runtime.file("setkey.sh");
  // Reads the pid from the state, and adds a veth pair to that process's network namespace.
  WriteFile(setkey,
            "#!/bin/sh\npid=$(tr -d ' \\n' | sed -n 's/.*\"pid\":\\([0-9]*\\).*/\\1/p')\n"
            "exec /usr/bin/nsenter --net=/proc/$pid/ns/net /usr/sbin/ip link add setkey0 type veth "
            "peer name setkey1\n");
  chmod(setkey.c_str(), 0755);
  bundle.config["hooks"] = {
      {"prestart", {{{"path", setkey}, {"env", {"PATH=/usr/bin:/bin"}}}}},
      {"poststart", {{{"path", record}, {"args", {"record", runtime.file("poststart.json")}}}}},
      {"poststop", {{{"path", record}, {"args", {"record", runtime.file("poststop.json")}}}}},
  };
  bundle.config["process"]["args"] = {"/bin/sh", "-c",
                                      "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort"};
  bundle.Save();
  std::string out = runtime.file("hooks.out");
  auto run = runtime.Call({"run", "--bundle", bundle.path(), "h1"}, out);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(ReadFile(out), "lo\nsetkey0\nsetkey1\n")
      << "the container is in the namespace its hook set up";
  json poststart = json::parse(ReadFile(runtime.file("poststart.json")), nullptr, false);
  EXPECT_EQ(poststart.value("status", ""), "running") << poststart.dump();
  EXPECT_EQ(poststart.value("id", ""), "h1");
  json poststop = json::parse(ReadFile(runtime.file("poststop.json")), nullptr, false);
  EXPECT_EQ(poststop.value("status", ""), "stopped") << poststop.dump();
  // A prestart hook that fails fails the create, naming it, with nothing left.
  bundle.config["hooks"] = {{"prestart", {{{"path", "/bin/false"}}}}};
  bundle.Save();
  auto failed = runtime.Call({"create", "--bundle", bundle.path(), "h2"});
  EXPECT_EQ(failed.exit_code, 1);
  EXPECT_NE(failed.err.find("hooks.prestart[0]"), std::string::npos) << failed.err;
  EXPECT_FALSE(std::filesystem::exists(runtime.root() + "/h2"));
}

// A running container whose process prints "main-started" and sleeps with token as its $0.
// The bundle stays while the container runs, as an engine's does: exec reads its config.
void StartSleeper(const OciRuntime& runtime, OciBundle& bundle, const std::string& id,
                  const std::string& token) {
  bundle.config["process"]["args"] = {"/bin/sh", "-c", "echo main-started; sleep 600; :", token};
  bundle.Save();
  std::string out = runtime.file(id + ".out");
  auto created = runtime.Call({"create", "--bundle", bundle.path(), id}, out);
  ASSERT_EQ(created.exit_code, 0) << created.err;
  ASSERT_EQ(runtime.Call({"start", id}).exit_code, 0);
  ASSERT_TRUE(
      WaitUntil([&] { return ReadFile(out) == "main-started\n"; }, std::chrono::seconds(30)));
}

TEST(OciRuntime, exec_runs_a_second_process_beside_the_first_with_the_same_confinement) {
  OciRuntime runtime;
  std::string token = RandomToken();
  OciBundle bundle;
  ASSERT_NO_FATAL_FAILURE(StartSleeper(runtime, bundle, "e1", token));
  std::string out = runtime.file("exec.out");
  auto exec = runtime.Call(
      {"exec", "e1", "/bin/sh", "-c",
       "grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\t' ' '; hostname; "
       "cat /proc/[0-9]*/comm | grep -x sleep; exit 3"},
      out);
  EXPECT_EQ(exec.exit_code, 3) << exec.err;
  // No capabilities, no_new_privs and the seccomp filter, as the container's own process has; the
  // container's hostname, and its process in the same pid namespace.
  EXPECT_EQ(ReadFile(out), "CapEff: 0000000000000000\nNoNewPrivs: 1\nSeccomp: 2\nrunc\nsleep\n");
  EXPECT_EQ(runtime.State("e1")["status"], "running") << "the container's process goes on";

  // A process.json, as engines pass it: its own env, user and cwd.
  json process = {{"args", {"/bin/sh", "-c", "echo $FROM_PROCESS $(id -u):$(id -g) $(pwd)"}},
                  {"env", {"PATH=/bin", "FROM_PROCESS=yes"}},
                  {"cwd", "/etc"},
                  {"user", {{"uid", 1000}, {"gid", 1001}}}};
  WriteFile(runtime.file("process.json"), process.dump());
  std::string process_out = runtime.file("process.out");
  auto with_file =
      runtime.Call({"exec", "--process", runtime.file("process.json"), "e1"}, process_out);
  EXPECT_EQ(with_file.exit_code, 0) << with_file.err;
  EXPECT_EQ(ReadFile(process_out), "yes 1000:1001 /etc\n");

  // Detached, as engines run it: its pid is in the pid file, and it ends with the container.
  std::string exec_token = RandomToken();
  auto detached = runtime.Call({"exec", "--detach", "--pid-file", runtime.file("exec.pid"), "e1",
                                "/bin/sh", "-c", "sleep 600; :", exec_token});
  ASSERT_EQ(detached.exit_code, 0) << detached.err;
  pid_t exec_pid = std::stoi(ReadFile(runtime.file("exec.pid")));
  EXPECT_TRUE(
      WaitUntil([&] { return CountProcessesWith(exec_token) > 0; }, std::chrono::seconds(30)));
  EXPECT_FALSE(ProcessGone(exec_pid));
  ASSERT_EQ(runtime.Call({"kill", "e1", "TERM"}).exit_code, 0);
  EXPECT_TRUE(WaitUntil([&] { return ProcessGone(exec_pid); }, std::chrono::seconds(30)));
  EXPECT_TRUE(
      WaitUntil([&] { return CountProcessesWith(exec_token) == 0; }, std::chrono::seconds(30)));
  auto stopped = runtime.Call({"exec", "e1", "/bin/true"});
  EXPECT_EQ(stopped.exit_code, 1);
  EXPECT_NE(stopped.err.find("cannot exec in a container that is stopped"), std::string::npos)
      << stopped.err;
  EXPECT_EQ(runtime.Call({"delete", "e1"}).exit_code, 0);
  EXPECT_EQ(CountProcessesWith(token), 0);
}

TEST(OciRuntime, a_signal_to_an_exec_ends_that_exec_and_not_the_container) {
  OciRuntime runtime;
  std::string token = RandomToken();
  OciBundle bundle;
  ASSERT_NO_FATAL_FAILURE(StartSleeper(runtime, bundle, "e2", token));
  std::string exec_token = RandomToken();
  auto detached = runtime.Call({"exec", "-d", "--pid-file", runtime.file("exec.pid"), "e2",
                                "/bin/sh", "-c", "sleep 600; :", exec_token});
  ASSERT_EQ(detached.exit_code, 0) << detached.err;
  pid_t exec_pid = std::stoi(ReadFile(runtime.file("exec.pid")));
  EXPECT_TRUE(
      WaitUntil([&] { return CountProcessesWith(exec_token) > 0; }, std::chrono::seconds(30)));
  // SIGUSR1 ends an exec (its monitor takes it), as kill's do a container's; its default is to
  // end a process, never to be ignored, so only a monitor that takes it survives it.
  ASSERT_EQ(kill(exec_pid, SIGUSR1), 0);
  EXPECT_TRUE(WaitUntil([&] { return ProcessGone(exec_pid); }, std::chrono::seconds(30)));
  EXPECT_TRUE(
      WaitUntil([&] { return CountProcessesWith(exec_token) == 0; }, std::chrono::seconds(30)));
  EXPECT_EQ(runtime.State("e2")["status"], "running");
  EXPECT_GT(CountProcessesWith(token), 0);
  // The container's end ends its execs, which exit as runc's do then: killed.
  std::string last_token = RandomToken();
  std::string out = runtime.file("last.out");
  pid_t waited =
      runtime.Spawn({"exec", "e2", "/bin/sh", "-c", "echo in; sleep 600; :", last_token}, out);
  ASSERT_GT(waited, 0);
  // Its output, not its token: the exec command's own argv has the token from the start.
  EXPECT_TRUE(WaitUntil([&] { return ReadFile(out) == "in\n"; }, std::chrono::seconds(30)));
  EXPECT_EQ(runtime.Call({"delete", "--force", "e2"}).exit_code, 0);
  int status = 0;
  ASSERT_EQ(waitpid(waited, &status, 0), waited);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGKILL) << status;
  EXPECT_EQ(CountProcessesWith(last_token), 0);
}

TEST(OciRuntime, a_bad_exec_is_an_error_naming_the_field) {
  OciRuntime runtime;
  auto missing = runtime.Call({"exec", "nosuch", "/bin/true"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("does not exist"), std::string::npos) << missing.err;
  OciBundle bundle;
  ASSERT_NO_FATAL_FAILURE(StartSleeper(runtime, bundle, "e3", RandomToken()));
  WriteFile(runtime.file("process.json"), R"({"args": [], "cwd": "/"})");
  auto no_args = runtime.Call({"exec", "--process", runtime.file("process.json"), "e3"});
  EXPECT_EQ(no_args.exit_code, 1);
  EXPECT_NE(no_args.err.find("process.args"), std::string::npos) << no_args.err;
  EXPECT_NE(ReadFile(runtime.log()).find("process.args"), std::string::npos);
  auto bad_user = runtime.Call({"exec", "--user", "me", "e3", "/bin/true"});
  EXPECT_EQ(bad_user.exit_code, 1);
  EXPECT_NE(bad_user.err.find("--user"), std::string::npos) << bad_user.err;
  auto no_command = runtime.Call({"exec", "e3"});
  EXPECT_EQ(no_command.exit_code, 1);
  EXPECT_NE(no_command.err.find("needs a command"), std::string::npos) << no_command.err;
  EXPECT_EQ(runtime.Call({"delete", "--force", "e3"}).exit_code, 0);
}

// The vm backend, as the annotations ask for it (emulation here, where there is no KVM): the
// container's process runs in a guest, with the config's hostname, the engine's files in its
// root, smolbox's confinement and its exit code.
TEST(OciVm, a_container_runs_in_a_guest_with_its_hostname_files_and_exit_code) {
  OciRuntime runtime;
  OciBundle bundle;
  WriteFile(runtime.file("hosts"), "127.0.0.1 localhost guest-hosts\n");
  bundle.config["mounts"].push_back({{"destination", "/etc/hosts"},
                                     {"type", "bind"},
                                     {"source", runtime.file("hosts")},
                                     {"options", {"bind", "ro"}}});
  bundle.config["hostname"] = "vmbox";
  bundle.config["annotations"] = {{"io.smolbox.backend", "vm"}, {"io.smolbox.accel", "tcg"}};
  bundle.config["process"]["args"] = {
      "/bin/sh", "-c",
      "grep -c rdinit=/init /proc/cmdline; hostname; cat /etc/hosts; grep -E "
      "'^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\\t' ' '; exit 6"};
  bundle.Save();
  std::string out = runtime.file("vm.out");
  auto run = runtime.Call({"run", "--bundle", bundle.path(), "v1"}, out);
  EXPECT_EQ(run.exit_code, 6) << run.err;
  // The guest kernel's command line, not the host's.
  EXPECT_EQ(ReadFile(out),
            "1\nvmbox\n127.0.0.1 localhost guest-hosts\nCapEff: 0000000000000000\nNoNewPrivs: "
            "1\nSeccomp: 2\n");
  EXPECT_FALSE(std::filesystem::exists(runtime.root() + "/v1"));
}

TEST(OciVm, exec_into_a_guest_is_refused_naming_why_and_the_container_goes_on) {
  OciRuntime runtime;
  OciBundle bundle;
  std::string token = RandomToken();
  bundle.config["annotations"] = {{"io.smolbox.backend", "vm"}, {"io.smolbox.accel", "tcg"}};
  bundle.config["process"]["args"] = {"/bin/sh", "-c", "echo main-started; sleep 600; :", token};
  bundle.Save();
  std::string out = runtime.file("main.out");
  ASSERT_EQ(runtime.Call({"create", "--bundle", bundle.path(), "v2"}, out).exit_code, 0);
  ASSERT_EQ(runtime.Call({"start", "v2"}).exit_code, 0);
  ASSERT_TRUE(
      WaitUntil([&] { return ReadFile(out) == "main-started\n"; }, std::chrono::seconds(60)));
  auto exec = runtime.Call({"exec", "v2", "/bin/true"});
  EXPECT_EQ(exec.exit_code, 1);
  EXPECT_NE(exec.err.find("the vm backend does not take a second process yet"), std::string::npos)
      << exec.err;
  EXPECT_EQ(runtime.State("v2")["status"], "running");
  EXPECT_EQ(runtime.Call({"delete", "--force", "v2"}).exit_code, 0);
}

TEST(OciRuntime, features_says_what_it_reads) {
  OciRuntime runtime;
  std::string out = runtime.file("features.out");
  ASSERT_EQ(runtime.Call({"features"}, out).exit_code, 0);
  json features = json::parse(ReadFile(out));
  EXPECT_EQ(features["ociVersionMin"], "1.0.0");
  EXPECT_EQ(features["hooks"], json::array()) << "smolbox runs no hooks";
  EXPECT_NE(features["annotations"]["io.smolbox.annotations"].get<std::string>().find(
                "io.smolbox.egress"),
            std::string::npos);
}

}  // namespace
}  // namespace smolbox::testing
