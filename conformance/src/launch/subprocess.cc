#include "launch/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "unique_fd.h"

extern char** environ;

namespace smolvm_check {
namespace {

using smolbox::UniqueFd;

// The caller's environment with extra "K=V" entries replacing those of the same key.
std::vector<std::string> MergedEnvironment(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    std::string key = entry.substr(0, entry.find('=') + 1);
    bool replaced = false;
    for (const std::string& x : extra) replaced = replaced || x.starts_with(key);
    if (!replaced) env.push_back(std::move(entry));
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

std::vector<char*> Pointers(std::vector<std::string>& words) {
  std::vector<char*> out;
  for (std::string& w : words) out.push_back(w.data());
  out.push_back(nullptr);
  return out;
}

// Reads both pipes until both are closed; poll() keeps either from filling up and blocking.
void Drain(UniqueFd& out_fd, UniqueFd& err_fd, Captured& result) {
  char buffer[16384];
  while (out_fd.valid() || err_fd.valid()) {
    pollfd fds[2] = {{out_fd.get(), POLLIN, 0}, {err_fd.get(), POLLIN, 0}};
    // EINTR is a signal for the caller's handler (Ctrl-C): the helper finishes regardless.
    if (poll(fds, 2, -1) < 0) continue;
    for (int i = 0; i < 2; ++i) {
      UniqueFd& fd = i == 0 ? out_fd : err_fd;
      if (!fd.valid() || fds[i].revents == 0) continue;
      ssize_t n = read(fd.get(), buffer, sizeof buffer);
      if (n > 0)
        (i == 0 ? result.out : result.err).append(buffer, static_cast<size_t>(n));
      else if (n == 0 || errno != EINTR)
        fd.Reset();
    }
  }
}

int WaitExitCode(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

Expected<Captured> RunCaptured(const std::vector<std::string>& argv,
                               const CaptureOptions& options) {
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (pipe2(out_pipe, O_CLOEXEC) < 0 || pipe2(err_pipe, O_CLOEXEC) < 0) {
    return std::unexpected(Error::Sys("pipe2"));
  }
  UniqueFd out_read(out_pipe[0]), out_write(out_pipe[1]), err_read(err_pipe[0]),
      err_write(err_pipe[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // No stdin: gh and git must never wait for an answer nobody can give.
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  if (options.stdout_path.empty()) {
    posix_spawn_file_actions_adddup2(&actions, out_write.get(), 1);
  } else {
    posix_spawn_file_actions_addopen(&actions, 1, options.stdout_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  posix_spawn_file_actions_adddup2(&actions, err_write.get(), 2);
  std::vector<std::string> args = argv;
  std::vector<std::string> env = options.only_extra_env ? options.extra_env : MergedEnvironment(options.extra_env);
  std::vector<char*> arg_ptrs = Pointers(args), env_ptrs = Pointers(env);
  pid_t pid = -1;
  // posix_spawnp searches the caller's PATH (not env's), which is what a stand-in relies on.
  int rc = posix_spawnp(&pid, arg_ptrs[0], &actions, nullptr, arg_ptrs.data(), env_ptrs.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return std::unexpected(Error::Sys("start " + argv[0], rc));
  out_write.Reset();
  err_write.Reset();
  Captured result;
  Drain(out_read, err_read, result);
  result.exit_code = WaitExitCode(pid);
  return result;
}

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace smolvm_check
