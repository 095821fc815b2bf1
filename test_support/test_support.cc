#include "test_support.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <system_error>
#include <thread>

extern char** environ;

namespace smolbox::testing {
namespace {

// The test's environment with each "K=V" of extra in place of any K it had.
std::vector<std::string> EnvironmentWith(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  auto overridden = [&](std::string_view entry) {
    for (const auto& e : extra) {
      auto key = std::string_view(e).substr(0, e.find('=') + 1);
      if (entry.starts_with(key)) return true;
    }
    return false;
  };
  for (char** e = environ; *e != nullptr; ++e) {
    if (!overridden(*e)) env.emplace_back(*e);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

// execvpe's argv or envp: pointers into strings that outlive the exec.
std::vector<char*> Pointers(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (const auto& s : strings) pointers.push_back(const_cast<char*>(s.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void WriteFile(const std::string& path, std::string_view content) {
  std::error_code ignored;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ignored);
  std::ofstream(path, std::ios::binary) << content;
}

std::string ReadAll(int fd) {
  std::string text;
  char buffer[65536];
  for (ssize_t n; (n = read(fd, buffer, sizeof buffer)) > 0;) {
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

TempDir::TempDir(std::string_view prefix) {
  std::string templ = "/tmp/" + std::string(prefix) + "-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) {
    throw std::system_error(errno, std::generic_category(), "mkdtemp " + templ);
  }
  path_ = templ;
  chmod(path_.c_str(), 0755);
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::Write(const std::string& name, std::string_view content) const {
  std::string path = path_ + "/" + name;
  WriteFile(path, content);
  return path;
}

std::string RandomToken() {
  std::random_device rd;
  std::ostringstream out;
  out << "canary-" << std::hex << rd() << rd();
  return out.str();
}

ProgramRun RunProgram(const std::vector<std::string>& argv, const ProgramOptions& options) {
  ProgramRun run;
  if (argv.empty()) return run;
  // Everything the child needs is made before fork: it only dups, runs in_child and execs.
  std::vector<std::string> env = EnvironmentWith(options.extra_env);
  std::vector<char*> args = Pointers(argv), envp = Pointers(env);
  // Memory files, not pipes: nothing a daemonized grandchild keeps open can hold up the wait.
  int out = memfd_create("stdout", MFD_CLOEXEC);
  int err = memfd_create("stderr", MFD_CLOEXEC);
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t pid = out >= 0 && err >= 0 && null_fd >= 0 ? fork() : -1;
  if (pid == 0) {
    dup2(null_fd, 0);
    dup2(out, 1);
    dup2(err, 2);
    if (options.in_child) options.in_child();
    execvpe(args[0], args.data(), envp.data());
    _exit(127);
  }
  if (pid > 0 && waitpid(pid, &run.wait_status, 0) == pid) {
    run.exit_code = ExitCodeOf(run.wait_status);
    lseek(out, 0, SEEK_SET);
    lseek(err, 0, SEEK_SET);
    run.out = ReadAll(out);
    run.err = ReadAll(err);
  }
  for (int fd : {out, err, null_fd}) {
    if (fd >= 0) close(fd);
  }
  return run;
}

int ExitCodeOf(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

bool OnPath(const std::string& name) {
  std::istringstream dirs(getenv("PATH") ? getenv("PATH") : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (!dir.empty() && access((dir + "/" + name).c_str(), X_OK) == 0) return true;
  }
  return false;
}

bool ProcessAlive(pid_t pid) { return pid > 1 && kill(pid, 0) == 0; }
bool GroupAlive(pid_t pgid) { return pgid > 1 && kill(-pgid, 0) == 0; }

bool Running(pid_t pid) {
  // The state follows the last ')': the command name before it may hold any character.
  std::string stat = ReadFileOrEmpty("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  return close != std::string::npos && stat.size() > close + 2 && stat[close + 2] != 'Z' &&
         stat[close + 2] != 'X';
}

size_t OpenFdCount() {
  return static_cast<size_t>(
      std::distance(std::filesystem::directory_iterator("/proc/self/fd"), {}));
}

bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

void PutU32(std::string& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

std::string RawFrame(std::string_view header, std::string_view tail) {
  std::string frame;
  PutU32(frame, static_cast<uint32_t>(4 + header.size() + tail.size()));
  PutU32(frame, static_cast<uint32_t>(header.size()));
  frame.append(header);
  frame.append(tail);
  return frame;
}

size_t CountEntries(const std::string& dir) {
  std::error_code ec;
  auto it = std::filesystem::directory_iterator(dir, ec);
  return ec ? 0 : static_cast<size_t>(std::distance(it, std::filesystem::directory_iterator()));
}

size_t CountLines(const std::string& path) {
  std::string text = ReadFileOrEmpty(path);
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

size_t CountBoundLoopDevices() {
  size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/block")) {
    if (std::filesystem::exists(entry.path() / "loop" / "backing_file")) ++count;
  }
  return count;
}

size_t CountSmolboxCgroups() {
  size_t count = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(
           "/sys/fs/cgroup", std::filesystem::directory_options::skip_permission_denied, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec) && it->path().filename().string().starts_with("smolbox-")) ++count;
  }
  return count;
}

std::string StateRootOfThisUser() {
  if (geteuid() == 0) return "/run/smolbox";
  if (const char* xdg = getenv("XDG_RUNTIME_DIR"); xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/smolbox";
  return "/tmp/smolbox-" + std::to_string(geteuid());
}

}  // namespace smolbox::testing
