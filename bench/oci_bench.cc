// A container's cost through an OCI runtime, as an engine pays it: create, start, the process
// (busybox's true) to its end, delete. runc is the baseline, on the same bundle in the same run;
// the ratio is smolbox-oci's median over runc's.
//
//   build/bin/smolbox_oci_bench --benchmark_repetitions=10 --benchmark_report_aggregates_only=true
//
// Root, with busybox-static and runc installed; a runtime that is not installed is skipped.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench_main.h"

extern char** environ;

namespace smolbox::bench {
namespace {

namespace fs = std::filesystem;

// A bundle of busybox's true, read-only, with nothing either runtime must refuse or replace
// beyond what every engine sets.
class Bundle {
 public:
  Bundle() {
    char pattern[] = "/tmp/oci-bench-XXXXXX";
    dir_ = mkdtemp(pattern);
    fs::create_directories(dir_ + "/rootfs/bin");
    fs::copy_file("/bin/busybox", dir_ + "/rootfs/bin/busybox");
    fs::create_symlink("busybox", dir_ + "/rootfs/bin/true");
    std::ofstream(dir_ + "/config.json") << R"({
      "ociVersion": "1.0.2",
      "process": {"terminal": false, "user": {"uid": 0, "gid": 0}, "args": ["/bin/true"],
                  "env": ["PATH=/bin"], "cwd": "/", "noNewPrivileges": true},
      "root": {"path": "rootfs", "readonly": true},
      "hostname": "bench",
      "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
                 {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "mode=755"]}],
      "linux": {"namespaces": [{"type": "pid"}, {"type": "network"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}]}
    })";
  }
  ~Bundle() { fs::remove_all(dir_); }
  const std::string& path() const { return dir_; }

 private:
  std::string dir_;
};

// RUNTIME --root ROOT ARGS..., stdio on /dev/null; its exit code, or -1.
int Call(const std::string& runtime, const std::string& root, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {runtime, "--root", root};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> pointers;
  for (auto& arg : argv) pointers.push_back(arg.data());
  pointers.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  for (int fd = 0; fd < 3; ++fd) posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", O_RDWR, 0);
  pid_t pid = -1;
  int spawned = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, pointers.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  if (spawned != 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// One container's life, as an engine drives it. This process is the subreaper the engine
// would be, so the container's process (runc's init, smolbox's monitor) is its to wait for.
bool Lifecycle(const std::string& runtime, const std::string& root, const Bundle& bundle, int n, std::string& why) {
  std::string id = fmt::format("bench-{}-{}", getpid(), n);
  std::string pid_file = root + "/" + id + ".pid";
  if (Call(runtime, root, {"create", "--bundle", bundle.path(), "--pid-file", pid_file, id}) != 0) {
    why = "create failed";
    return false;
  }
  pid_t pid = 0;
  std::ifstream(pid_file) >> pid;
  bool started = Call(runtime, root, {"start", id}) == 0;
  int status = 0;
  bool waited = pid > 0 && waitpid(pid, &status, 0) == pid;
  bool deleted = Call(runtime, root, {"delete", "--force", id}) == 0;
  fs::remove(pid_file);
  if (!started || !waited || !deleted || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    why = fmt::format("started {} waited {} deleted {} status {:#x}", started, waited, deleted, status);
    return false;
  }
  return true;
}

void ContainerLifecycle(benchmark::State& state, const std::string& runtime) {
  if (getuid() != 0) return Fail(state, "needs root");
  if (access(runtime.c_str(), X_OK) != 0) return state.SkipWithError((runtime + " is not installed").c_str());
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  Bundle bundle;
  std::string root = bundle.path() + "/state";
  fs::create_directories(root);
  int n = 0;
  for (auto _ : state) {
    std::string why;
    if (!Lifecycle(runtime, root, bundle, n++, why)) return Fail(state, runtime + ": " + why);
  }
}

std::string SmolboxOci() { return (fs::read_symlink("/proc/self/exe").parent_path() / "smolbox-oci").string(); }

BENCHMARK_CAPTURE(ContainerLifecycle, runc, std::string("/usr/sbin/runc"))->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(ContainerLifecycle, smolbox_oci, SmolboxOci())->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace smolbox::bench

int main(int argc, char** argv) { return smolbox::bench::Main(argc, argv); }
