#include "check_runner.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

namespace smolvm_check {
namespace {

std::string ReadAll(int fd) {
  std::string text;
  char buffer[65536];
  for (ssize_t n; (n = read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<size_t>(n));
  return text;
}

}  // namespace

Invocation RunCheck(std::vector<std::string> args) {
  char out_path[] = "/tmp/smolvm-check-out-XXXXXX";
  char err_path[] = "/tmp/smolvm-check-err-XXXXXX";
  int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    args.insert(args.begin(), std::string(SMOLBOX_BIN_DIR) + "/smolvm-check");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(99);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  Invocation inv;
  inv.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  lseek(out_fd, 0, SEEK_SET);
  lseek(err_fd, 0, SEEK_SET);
  inv.out = ReadAll(out_fd);
  inv.err = ReadAll(err_fd);
  close(out_fd);
  close(err_fd);
  unlink(out_path);
  unlink(err_path);
  inv.report = nlohmann::json::parse(inv.out, nullptr, false);
  return inv;
}

}  // namespace smolvm_check
