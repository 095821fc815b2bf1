#include "smolbox_runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace smolbox::testing {

std::string SmolboxPath() { return std::string(SMOLBOX_BIN_DIR) + "/smolbox"; }
std::string HelperPath(const std::string& name) { return std::string(SMOLBOX_BIN_DIR) + "/" + name; }

namespace {

// The build tree may sit below a directory another uid cannot enter (/root); the rootless
// tests run a copy of the binaries from a world-readable place.
std::string RootlessSmolbox() {
  static const TempDir dir;
  static const std::string path = [] {
    for (const char* name : {"smolbox", "smolbox-agent"}) {
      std::filesystem::copy_file(HelperPath(name), dir.path() + "/" + name);
    }
    return dir.path() + "/smolbox";
  }();
  return path;
}

void Drain(int out_fd, int err_fd, std::string& out, std::string& err) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  int open_count = 2;
  char buffer[65536];
  while (open_count > 0) {
    if (poll(fds, 2, -1) < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !fds[i].revents) continue;
      ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n <= 0) {
        fds[i].fd = -1;
        --open_count;
        continue;
      }
      (i == 0 ? out : err).append(buffer, static_cast<size_t>(n));
    }
  }
}

}  // namespace

Invocation RunSmolbox(const std::vector<std::string>& args, const std::vector<std::string>& env, uid_t as_uid) {
  if (as_uid != 0) RootlessSmolbox();  // before fork: the child must not allocate
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) return {};
  auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    int null_fd = open("/dev/null", O_RDONLY);
    dup2(null_fd, 0);
    if (as_uid != 0) {
      if (setgroups(0, nullptr) != 0 || setresgid(as_uid, as_uid, as_uid) != 0 ||
          setresuid(as_uid, as_uid, as_uid) != 0) {
        _exit(99);
      }
    }
    std::vector<std::string> argv_s = {as_uid != 0 ? RootlessSmolbox() : SmolboxPath()};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv, envp;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_s = {"PATH=/usr/bin:/bin"};
    // The vm's guest artifacts, when the tests are pointed at a build of their own.
    if (const char* guest = getenv("SMOLBOX_GUEST_DIR")) env_s.push_back(std::string("SMOLBOX_GUEST_DIR=") + guest);
    env_s.insert(env_s.end(), env.begin(), env.end());
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
    execve(argv[0], argv.data(), envp.data());
    _exit(98);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  Invocation inv;
  Drain(out_pipe[0], err_pipe[0], inv.out, inv.err);
  close(out_pipe[0]);
  close(err_pipe[0]);
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  inv.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  inv.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  inv.max_rss_kib = usage.ru_maxrss;
  inv.result = nlohmann::json::parse(inv.out, nullptr, false);
  return inv;
}

Invocation RunJson(const std::vector<std::string>& options, const std::vector<std::string>& command) {
  std::vector<std::string> args = {"run", "--json", "--backend", "ns"};
  args.insert(args.end(), options.begin(), options.end());
  args.push_back("--");
  args.insert(args.end(), command.begin(), command.end());
  return RunSmolbox(args);
}

int CountProcessesWith(const std::string& marker) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = ReadFileOrEmpty(entry.path().string() + "/cmdline");
    if (cmdline.find(marker) != std::string::npos && std::to_string(getpid()) != name) ++count;
  }
  return count;
}

TempDir::TempDir() {
  char templ[] = "/tmp/smolbox-test-XXXXXX";
  path_ = mkdtemp(templ);
  chmod(path_.c_str(), 0755);
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::Write(const std::string& name, const std::string& content) const {
  std::string path = path_ + "/" + name;
  std::ofstream(path) << content;
  return path;
}

std::string RandomToken() {
  std::random_device rd;
  std::ostringstream out;
  out << "canary-" << std::hex << rd() << rd();
  return out.str();
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace smolbox::testing
