#include "smolbox_runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <sstream>

#include "test_support.h"

namespace smolbox::testing {

namespace {

// The build's, or a copy that test_support/as-unprivileged made where another uid may run it.
std::string BinDir() {
  const char* copy = getenv("SMOLBOX_TEST_BIN_DIR");
  return copy != nullptr && copy[0] == '/' ? copy : SMOLBOX_BIN_DIR;
}

}  // namespace

std::string SmolboxPath() { return BinDir() + "/smolbox"; }
std::string HelperPath(const std::string& name) { return BinDir() + "/" + name; }

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

// In the forked child: becomes `smolbox ARGS`, with a clean environment.
[[noreturn]] void ExecSmolbox(const std::vector<std::string>& args, const std::vector<std::string>& env, uid_t as_uid,
                              const std::vector<std::string>& prefix = {}) {
  if (as_uid != 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(as_uid, as_uid, as_uid) != 0 ||
        setresuid(as_uid, as_uid, as_uid) != 0) {
      _exit(99);
    }
  }
  std::vector<std::string> argv_s = prefix;
  argv_s.push_back(as_uid != 0 ? RootlessSmolbox() : SmolboxPath());
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv, envp;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s = {"PATH=/usr/bin:/bin"};
  env_s.insert(env_s.end(), env.begin(), env.end());
  // From the tests' own environment, unless the test names its own (of two entries the first
  // would win): the vm's guest artifacts, when the tests are pointed at a build of their own,
  // and the protections a mutant build's tests run without (smolvm-check mutate's "tests").
  for (const char* name : {"SMOLBOX_GUEST_DIR", "SMOLBOX_DISABLE"}) {
    std::string prefix_eq = std::string(name) + "=";
    bool test_sets = std::any_of(env.begin(), env.end(), [&](const std::string& e) { return e.starts_with(prefix_eq); });
    if (const char* value = getenv(name); value != nullptr && !test_sets) env_s.push_back(prefix_eq + value);
  }
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  execve(argv[0], argv.data(), envp.data());
  _exit(98);
}

int MsLeft(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

}  // namespace

Invocation RunSmolbox(const std::vector<std::string>& args, const std::vector<std::string>& env, uid_t as_uid,
                      const std::vector<std::string>& prefix) {
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
    ExecSmolbox(args, env, as_uid, prefix);
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
  inv.exit_code = ExitCodeOf(status);
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

LiveSmolbox::LiveSmolbox(const std::vector<std::string>& args, const std::vector<std::string>& env,
                         const std::vector<std::string>& prefix) {
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) return;
  pid_ = fork();
  if (pid_ == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    ExecSmolbox(args, env, 0, prefix);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  stdin_ = in[1];
  stdout_ = out[0];
  stderr_ = err[0];
}

LiveSmolbox::~LiveSmolbox() {
  if (!exit_code_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  for (int fd : {stdin_, stdout_, stderr_}) {
    if (fd >= 0) close(fd);
  }
}

bool LiveSmolbox::WriteStdin(std::string_view data, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!data.empty()) {
    pollfd fd{stdin_, POLLOUT, 0};
    if (poll(&fd, 1, MsLeft(deadline)) <= 0) return false;
    ssize_t n = write(stdin_, data.data(), std::min<size_t>(data.size(), 4096));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool LiveSmolbox::WriteZeros(int64_t size, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string zeros(1 << 20, '\0');
  for (int64_t left = size; left > 0; left -= static_cast<int64_t>(zeros.size())) {
    auto piece = std::string_view(zeros).substr(0, static_cast<size_t>(std::min<int64_t>(left, zeros.size())));
    auto remaining = std::chrono::duration_cast<std::chrono::seconds>(deadline - std::chrono::steady_clock::now());
    if (remaining.count() <= 0 || !WriteStdin(piece, remaining)) return false;
  }
  return true;
}

void LiveSmolbox::CloseStdin() {
  if (stdin_ >= 0) close(stdin_);
  stdin_ = -1;
}

std::string LiveSmolbox::ReadStdoutUntil(std::string_view needle, std::chrono::seconds timeout, size_t from) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buffer[65536];
  while (out_.find(needle, from) == std::string::npos && stdout_ >= 0) {
    pollfd fd{stdout_, POLLIN, 0};
    if (poll(&fd, 1, MsLeft(deadline)) <= 0) break;
    ssize_t n = read(stdout_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out_.append(buffer, static_cast<size_t>(n));
  }
  return out_;
}

void LiveSmolbox::CloseStdout() {
  if (stdout_ >= 0) close(stdout_);
  stdout_ = -1;
}

std::optional<int> LiveSmolbox::Wait(std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buffer[65536];
  while (!exit_code_) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_code_ = ExitCodeOf(status);
      break;
    }
    if (MsLeft(deadline) == 0) break;
    // A pipe at EOF stays readable: it leaves the poll set, or this would spin.
    pollfd fds[2] = {{err_eof_ ? -1 : stderr_, POLLIN, 0}, {out_eof_ ? -1 : stdout_, POLLIN, 0}};
    poll(fds, 2, std::min(100, MsLeft(deadline)));
    if (fds[0].revents != 0) {
      ssize_t n = read(stderr_, buffer, sizeof buffer);
      if (n > 0) err_.append(buffer, static_cast<size_t>(n));
      err_eof_ = n == 0;
    }
    if (fds[1].revents != 0) {
      ssize_t n = read(stdout_, buffer, sizeof buffer);
      if (n > 0) out_.append(buffer, static_cast<size_t>(n));
      out_eof_ = n == 0;
    }
  }
  // What it wrote last, once it has exited.
  for (ssize_t n; exit_code_ && (n = read(stderr_, buffer, sizeof buffer)) > 0;) err_.append(buffer, static_cast<size_t>(n));
  return exit_code_;
}

long LiveSmolbox::PeakRssKib() const {
  std::istringstream status(ReadFileOrEmpty(fmt::format("/proc/{}/status", pid_)));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
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

PrivateMountScript::PrivateMountScript() : name_("p-" + RandomToken().substr(0, 16)) {
  char pattern[] = "/tmp/smolbox-test-mounts-XXXXXX";
  if (mkdtemp(pattern) != nullptr) dir_ = pattern;
}

PrivateMountScript::~PrivateMountScript() {
  std::error_code ignored;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
}

PrivateMountScript::Ran PrivateMountScript::Run(const std::string& script) const {
  ProgramOptions options;
  options.extra_env = {"SMOLBOX=" + SmolboxPath(), "DIR=" + dir_, "NAME=" + name_};
  ProgramRun run =
      RunProgram({"/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script}, options);
  return {run.exit_code, run.out, run.err};
}

std::string PrivateMountScript::Text(const std::string& file) const { return ReadFileOrEmpty(dir_ + "/" + file); }

nlohmann::json PrivateMountScript::Json(const std::string& file) const {
  return nlohmann::json::parse(Text(file), nullptr, false);
}

}  // namespace smolbox::testing
