#include "launch/process_tree.h"

#include <dirent.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>

#include "launch/host_files.h"
#include "unique_fd.h"

namespace smolvm_check {
namespace {

struct ProcStat {
  char state = '?';
  pid_t pgrp = 0;
  pid_t session = 0;
};

std::optional<ProcStat> ReadStat(pid_t pid) {
  std::string text = ReadUpTo(fmt::format("/proc/{}/stat", pid));
  // The command name may hold spaces and parentheses: fields resume after the last ')'.
  auto close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream in(text.substr(close + 1));
  ProcStat st;
  pid_t ppid = 0;
  if (!(in >> st.state >> ppid >> st.pgrp >> st.session)) return std::nullopt;
  return st;
}

bool InTree(pid_t pid, pid_t leader) {
  auto st = ReadStat(pid);
  return st && st->state != 'Z' && (st->pgrp == leader || st->session == leader);
}

}  // namespace

std::vector<pid_t> ScanTree(pid_t leader) {
  std::vector<pid_t> found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* e = readdir(proc)) {
    char* end = nullptr;
    long pid = strtol(e->d_name, &end, 10);
    if (*end == '\0' && pid > 1 && pid != getpid() && InTree(static_cast<pid_t>(pid), leader)) {
      found.push_back(static_cast<pid_t>(pid));
    }
  }
  closedir(proc);
  return found;
}

void KillIfInTree(pid_t pid, pid_t leader) {
  smolbox::UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd.valid() || !InTree(pid, leader)) return;
  syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
}

}  // namespace smolvm_check
