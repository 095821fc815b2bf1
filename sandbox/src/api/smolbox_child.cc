#include "smolbox_child.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "unique_fd.h"

namespace smolbox::api {
namespace {

// Between fork and exec only async-signal-safe calls: the parent has other threads, whose
// locks the child copied in whatever state they were.
[[noreturn]] void ExecChild(const char* exe, char* const* argv, int stdin_fd, int stdout_fd, int keep_fd,
                            pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The parent may have died before the prctl: then nothing would ever kill this child.
  if (getppid() != parent) _exit(127);
  int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (dup2(stdin_fd, 0) < 0 || dup2(stdout_fd, 1) < 0 || null < 0 || dup2(null, 2) < 0) _exit(127);
  if (keep_fd >= 0 && dup2(keep_fd, 3) < 0) _exit(127);
  if (keep_fd == 3) fcntl(3, F_SETFD, 0);  // dup2 onto itself keeps close-on-exec
  // The server's other descriptors (clients' connections among them) are not all
  // close-on-exec: none may live on in a keeper, which outlives this request.
  close_range(keep_fd >= 0 ? 4 : 3, ~0U, 0);
  // Signals the server blocked (it waits for SIGTERM with sigwait) or ignores (SIGPIPE) must not
  // stay so here: both would be inherited across the exec.
  signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execv(exe, argv);
  _exit(127);
}

// Writes input in full while reading stdout, so that neither side can block the other.
Expected<void> Exchange(UniqueFd in, int out_fd, const std::string& input, size_t max_stdout, int cancel_fd,
                        pid_t child, std::string& output) {
  size_t written = 0;
  if (input.empty()) in.Reset();
  char buffer[1 << 16];
  for (;;) {
    pollfd fds[3] = {{out_fd, POLLIN, 0}, {in.get(), POLLOUT, 0}, {cancel_fd, POLLIN, 0}};
    if (poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      return std::unexpected(Error::Sys("poll the smolbox child"));
    }
    if (fds[2].revents != 0) {
      kill(child, SIGKILL);
      cancel_fd = -1;
    }
    if (fds[1].revents != 0) {
      ssize_t n = write(in.get(), input.data() + written, input.size() - written);
      if (n > 0) written += static_cast<size_t>(n);
      if ((n < 0 && errno != EINTR) || written == input.size()) in.Reset();
    }
    if (fds[0].revents != 0) {
      ssize_t n = read(out_fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      output.append(buffer, static_cast<size_t>(n));
      if (output.size() > max_stdout) {
        kill(child, SIGKILL);
        return std::unexpected(Error{"smolbox child", "wrote more than it may", 0});
      }
    }
  }
  return {};
}

}  // namespace

Expected<ChildOutput> RunChild(const std::string& exe, const std::vector<std::string>& args, const std::string& input,
                               size_t max_stdout, int keep_fd, int cancel_fd) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0) return std::unexpected(Error::Sys("pipe"));
  UniqueFd in_read(in[0]), in_write(in[1]);
  if (pipe2(out, O_CLOEXEC) != 0) return std::unexpected(Error::Sys("pipe"));
  UniqueFd out_read(out[0]), out_write(out[1]);
  std::vector<std::string> argv_strings = {exe};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_strings) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return std::unexpected(Error::Sys("fork a smolbox child"));
  if (pid == 0) ExecChild(exe.c_str(), argv.data(), in_read.get(), out_write.get(), keep_fd, parent);
  in_read.Reset();
  out_write.Reset();
  ChildOutput result;
  auto exchanged = Exchange(std::move(in_write), out_read.get(), input, max_stdout, cancel_fd, pid, result.stdout_data);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  SMOLBOX_TRY(exchanged);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace smolbox::api
