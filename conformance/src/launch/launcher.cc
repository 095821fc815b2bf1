#include "launch/launcher.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "launch/host_files.h"
#include "program.h"
#include "unique_fd.h"

namespace smolvm_check {
namespace {

using smolbox::UniqueFd;
using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// Small file helpers. Cgroup files want one write() each and report errors through its errno.

bool WriteFile(const std::string& path, const std::string& value) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  return fd.valid() &&
         write(fd.get(), value.data(), value.size()) == static_cast<ssize_t>(value.size());
}

std::vector<std::string> Words(const std::string& text, char sep = 0) {
  std::vector<std::string> words;
  std::istringstream in(text);
  if (sep == 0) {
    for (std::string w; in >> w;) words.push_back(w);
  } else {
    for (std::string w; std::getline(in, w, sep);) words.push_back(w);
  }
  return words;
}

bool HasWord(const std::string& text, const std::string& word) {
  auto words = Words(text);
  return std::find(words.begin(), words.end(), word) != words.end();
}

std::string RandomSuffix() {
  uint64_t r = 0;
  if (getrandom(&r, sizeof r, 0) != sizeof r) {
    r = static_cast<uint64_t>(getpid()) ^ Clock::now().time_since_epoch().count();
  }
  return fmt::format("{:016x}", r);
}

// ---------------------------------------------------------------------------------------------
// The cgroup that holds a launched tree.

// Where each hierarchy is mounted and where in it this process lives.
struct Hierarchies {
  std::optional<std::string> v2_mount;
  std::map<std::string, std::string> v1_mount;  // controller -> mount point
  std::map<std::string, std::string> v1_self;   // controller -> our path in it
};

Hierarchies Discover() {
  Hierarchies h;
  std::istringstream mountinfo(ReadUpTo("/proc/self/mountinfo"));
  for (std::string line; std::getline(mountinfo, line);) {
    auto fields = Words(line);
    auto dash = std::find(fields.begin(), fields.end(), "-");
    if (fields.size() < 5 || dash == fields.end() || fields.end() - dash < 4) continue;
    if (dash[1] == "cgroup2" && !h.v2_mount) h.v2_mount = fields[4];
    if (dash[1] != "cgroup") continue;
    for (const auto& option : Words(dash[3], ',')) h.v1_mount.emplace(option, fields[4]);
  }
  std::istringstream self(ReadUpTo("/proc/self/cgroup"));
  for (std::string line; std::getline(self, line);) {
    auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    std::string path = line.substr(second + 1);
    if (path == "/") path.clear();
    for (const auto& c : Words(line.substr(first + 1, second - first - 1), ',')) {
      h.v1_self[c] = path;
    }
  }
  return h;
}

std::vector<pid_t> ReadPids(const std::string& procs_file) {
  std::vector<pid_t> pids;
  for (const auto& w : Words(ReadUpTo(procs_file))) pids.push_back(std::stoi(w));
  return pids;
}

bool RemoveDir(const std::string& path) {
  // rmdir fails with EBUSY until the last exiting task has left; that takes milliseconds.
  for (int i = 0; i < 200; ++i) {
    if (rmdir(path.c_str()) == 0 || errno == ENOENT) return true;
    if (errno != EBUSY) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

class NetCgroup {
 public:
  NetCgroup(const NetLimits& limits);
  ~NetCgroup();
  NetCgroup(const NetCgroup&) = delete;
  NetCgroup& operator=(const NetCgroup&) = delete;

  bool holds() const { return !dirs_.empty(); }
  const std::vector<std::string>& problems() const { return problems_; }
  const std::vector<std::string>& paths() const { return paths_; }
  Expected<void> Add(pid_t pid) const;
  std::vector<pid_t> Procs() const;
  // One pass: cgroup.kill where there is one, otherwise SIGKILL to every listed process.
  void Kill() const;
  // Kill() until every directory is empty, since on v1 a fork may race the listing.
  void KillAndWait() const;

 private:
  struct Dir {
    std::string path;
    int version;
  };
  void CreateV2(const Hierarchies& h);
  std::optional<Dir> PlaceController(const Hierarchies& h, const std::string& controller);

  std::string name_ = "smolvm-check-" + RandomSuffix();
  std::string v2_base_;
  std::vector<Dir> dirs_;  // each one distinct; v2 first when there is one
  std::vector<std::string> paths_;
  std::vector<std::string> problems_;
};

NetCgroup::NetCgroup(const NetLimits& limits) {
  if (geteuid() != 0) {
    problems_.push_back("not root");
    return;
  }
  Hierarchies h = Discover();
  CreateV2(h);
  auto limit = [&](const std::string& controller, const std::string& v2_file,
                   const std::string& v1_file, int64_t value) {
    auto dir = PlaceController(h, controller);
    if (!dir) return;
    std::string file = dir->path + "/" + (dir->version == 2 ? v2_file : v1_file);
    if (!WriteFile(file, std::to_string(value))) {
      problems_.push_back(fmt::format("cannot write {} ({})", file, strerror(errno)));
    }
  };
  limit("pids", "pids.max", "pids.max", limits.pids);
  limit("memory", "memory.max", "memory.limit_in_bytes", limits.memory_bytes);
  for (const auto& d : dirs_) paths_.push_back(d.path);
}

// v2 holds the tree even without controllers (hybrid hosts): cgroup.procs lists it and
// cgroup.kill kills it atomically. Runs go under one subtree at the top, which may enable
// controllers whatever process layout the host has.
void NetCgroup::CreateV2(const Hierarchies& h) {
  if (!h.v2_mount) return;
  v2_base_ = *h.v2_mount + "/smolvm-check";
  std::string available = ReadUpTo(*h.v2_mount + "/cgroup.controllers");
  // Another net may remove the shared base between our mkdir of it and of our own directory.
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (mkdir(v2_base_.c_str(), 0755) != 0 && errno != EEXIST) break;
    for (const char* c : {"pids", "memory"}) {
      if (!HasWord(available, c)) continue;
      WriteFile(*h.v2_mount + "/cgroup.subtree_control", fmt::format("+{}", c));
      WriteFile(v2_base_ + "/cgroup.subtree_control", fmt::format("+{}", c));
    }
    std::string path = v2_base_ + "/" + name_;
    if (mkdir(path.c_str(), 0755) == 0) return dirs_.push_back({path, 2});
    if (errno != ENOENT) break;
  }
  problems_.push_back(
      fmt::format("cannot create a cgroup under {} ({})", v2_base_, strerror(errno)));
}

std::optional<NetCgroup::Dir> NetCgroup::PlaceController(const Hierarchies& h,
                                                         const std::string& controller) {
  if (!dirs_.empty() && dirs_[0].version == 2 &&
      HasWord(ReadUpTo(v2_base_ + "/cgroup.subtree_control"), controller)) {
    return dirs_[0];
  }
  auto mount = h.v1_mount.find(controller);
  if (mount == h.v1_mount.end()) {
    problems_.push_back(fmt::format("no cgroup holds the {} controller", controller));
    return std::nullopt;
  }
  // Under our own v1 cgroup, so that whatever limits the runner lives under still apply.
  auto self = h.v1_self.find(controller);
  std::string path =
      fmt::format("{}{}/{}", mount->second, self == h.v1_self.end() ? "" : self->second, name_);
  if (mkdir(path.c_str(), 0755) != 0) {
    problems_.push_back(fmt::format("cannot create {} ({})", path, strerror(errno)));
    return std::nullopt;
  }
  dirs_.push_back({path, 1});
  return dirs_.back();
}

NetCgroup::~NetCgroup() {
  KillAndWait();
  for (const auto& d : dirs_) {
    if (!RemoveDir(d.path))
      fmt::print(stderr, "smolvm-check: cannot remove {}: {}\n", d.path, strerror(errno));
  }
  // Shared by concurrent nets: it goes with the last one.
  if (!v2_base_.empty()) rmdir(v2_base_.c_str());
}

Expected<void> NetCgroup::Add(pid_t pid) const {
  for (const auto& d : dirs_) {
    if (!WriteFile(d.path + "/cgroup.procs", std::to_string(pid))) {
      return std::unexpected(Error::Sys("write " + d.path + "/cgroup.procs"));
    }
  }
  return {};
}

std::vector<pid_t> NetCgroup::Procs() const {
  std::set<pid_t> all;
  for (const auto& d : dirs_) {
    for (pid_t pid : ReadPids(d.path + "/cgroup.procs")) all.insert(pid);
  }
  return {all.begin(), all.end()};
}

void NetCgroup::Kill() const {
  for (const auto& d : dirs_) {
    if (d.version == 2 && WriteFile(d.path + "/cgroup.kill", "1")) continue;
    for (pid_t pid : ReadPids(d.path + "/cgroup.procs")) {
      if (pid > 1) kill(pid, SIGKILL);
    }
  }
}

void NetCgroup::KillAndWait() const {
  for (int round = 0; round < 500 && !Procs().empty(); ++round) {
    Kill();
    std::this_thread::sleep_for(std::chrono::milliseconds(round < 10 ? 1 : 10));
  }
}

// ---------------------------------------------------------------------------------------------
// Without a cgroup: the tree is what shares the launched process's group or session.

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

// Held by a pidfd and checked again, so that a pid recycled since the scan is never signalled.
void KillIfInTree(pid_t pid, pid_t leader) {
  UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd.valid() || !InTree(pid, leader)) return;
  syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
}

// ---------------------------------------------------------------------------------------------
// The child, between fork and exec. The runner has threads, so only async-signal-safe calls and
// no allocation: everything it needs is prepared by the parent.

enum class Step : int { kSetsid, kSignals, kRlimit, kDup2, kCloseRange, kFcntl, kChdir, kExecve };

const char* StepName(Step step) {
  switch (step) {
    case Step::kSetsid:
      return "setsid";
    case Step::kSignals:
      return "reset signals";
    case Step::kRlimit:
      return "setrlimit RLIMIT_CORE";
    case Step::kDup2:
      return "dup2 stdio";
    case Step::kCloseRange:
      return "close_range";
    case Step::kFcntl:
      return "clear FD_CLOEXEC on an inherited fd";
    case Step::kChdir:
      return "chdir";
    case Step::kExecve:
      return "execve";
  }
  return "?";
}

struct Report {
  int step;
  int err;
};

struct ChildPlan {
  const char* path;
  char* const* argv;
  char* const* envp;
  const char* cwd;  // nullptr: stay
  int stdio[3];
  int sync_fd;
  int report_fd;
  const int* keep;  // sorted, above 2: the inherited fds and report_fd
  size_t keep_count;
  const int* inherit;
  size_t inherit_count;
};

[[noreturn]] void Fail(const ChildPlan& p, Step step) {
  Report report{static_cast<int>(step), errno};
  (void)!write(p.report_fd, &report, sizeof report);
  _exit(127);
}

bool CloseAllExcept(const ChildPlan& p) {
  unsigned low = 3;
  for (size_t i = 0; i < p.keep_count; ++i) {
    auto fd = static_cast<unsigned>(p.keep[i]);
    if (fd > low && close_range(low, fd - 1, 0) != 0) return false;
    low = fd + 1;
  }
  return close_range(low, ~0U, 0) == 0;
}

// A runner that ignores SIGPIPE, or blocks signals in its threads, must not pass that on.
bool ResetSignals() {
  sigset_t none;
  sigemptyset(&none);
  if (sigprocmask(SIG_SETMASK, &none, nullptr) != 0) return false;
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);  // EINVAL for glibc's own
  }
  return true;
}

[[noreturn]] void RunChild(const ChildPlan& p) {
  if (setsid() < 0) Fail(p, Step::kSetsid);
  // The parent moves us into the cgroup first: nothing of the launch runs outside the net.
  char go = 0;
  ssize_t n;
  while ((n = read(p.sync_fd, &go, 1)) < 0 && errno == EINTR) {
  }
  if (n != 1) _exit(127);
  if (!ResetSignals()) Fail(p, Step::kSignals);
  const rlimit no_core{0, 0};
  if (setrlimit(RLIMIT_CORE, &no_core) != 0) Fail(p, Step::kRlimit);
  for (int i = 0; i < 3; ++i) {
    if (dup2(p.stdio[i], i) < 0) Fail(p, Step::kDup2);
  }
  if (!CloseAllExcept(p)) Fail(p, Step::kCloseRange);
  for (size_t i = 0; i < p.inherit_count; ++i) {
    int flags = fcntl(p.inherit[i], F_GETFD);
    if (flags < 0 || fcntl(p.inherit[i], F_SETFD, flags & ~FD_CLOEXEC) != 0) Fail(p, Step::kFcntl);
  }
  if (p.cwd != nullptr && chdir(p.cwd) != 0) Fail(p, Step::kChdir);
  execve(p.path, p.argv, p.envp);
  Fail(p, Step::kExecve);
}

// ---------------------------------------------------------------------------------------------
// The parent.

// execvpe's lookup, done before fork against the launch's own PATH.
Expected<std::string> ResolveProgram(const std::string& name, const std::vector<std::string>& env) {
  if (name.empty()) return std::unexpected(Error::Field("argv[0]", "is empty"));
  if (name.find('/') != std::string::npos) return name;
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const auto& e : env) {
    if (e.starts_with("PATH=")) path = e.substr(5);
  }
  std::string found = smolbox::FindOnPath(path, name, smolbox::EmptyPathEntry::kCurrentDir);
  if (!found.empty()) return found;
  return std::unexpected(
      Error::Field("argv[0]", fmt::format("'{}' is not on PATH {}", name, path)));
}

// A close-on-exec pipe whose ends are above the stdio numbers, so that dup2 onto 0-2 never
// finds its own source there.
Expected<std::pair<UniqueFd, UniqueFd>> Pipe() {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return std::unexpected(Error::Sys("pipe2"));
  UniqueFd ends[2] = {UniqueFd(p[0]), UniqueFd(p[1])};
  for (auto& end : ends) {
    if (end.get() > 2) continue;
    int moved = fcntl(end.get(), F_DUPFD_CLOEXEC, 3);
    if (moved < 0) return std::unexpected(Error::Sys("fcntl F_DUPFD_CLOEXEC"));
    end.Reset(moved);
  }
  return std::pair{std::move(ends[0]), std::move(ends[1])};
}

Expected<void> CheckLaunch(const Launch& launch) {
  if (launch.argv.empty()) return std::unexpected(Error::Field("argv", "is empty"));
  if (launch.kill_after_ms <= 0) {
    return std::unexpected(
        Error::Field("kill_after_ms", "must be positive: the net needs a bound"));
  }
  for (int fd : launch.inherited_fds) {
    if (fd <= 2)
      return std::unexpected(Error::Field("inherited_fds", fmt::format("{} is stdio", fd)));
    if (fcntl(fd, F_GETFD) < 0)
      return std::unexpected(Error::Sys(fmt::format("inherited fd {}", fd)));
  }
  return {};
}

// Blocks SIGPIPE in this thread while the parent feeds stdin, and swallows the one a closed
// reader raises: the runner must not die because a payload closed its stdin.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &block, &old_);
  }
  ~SigpipeGuard() {
    if (!was_pending_) {
      sigset_t pipe_only;
      sigemptyset(&pipe_only);
      sigaddset(&pipe_only, SIGPIPE);
      timespec zero{};
      while (sigtimedwait(&pipe_only, nullptr, &zero) == SIGPIPE) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t old_{};
  bool was_pending_ = false;
};

// One output stream of the launch: captured up to a cap, the rest read and dropped, so that the
// launched process never blocks on a full pipe.
struct Capture {
  UniqueFd fd;
  std::string* data;
  int64_t* total;
  size_t cap;

  // False once the stream is at EOF or broken.
  bool ReadOnce() {
    char buf[65536];
    ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    if (n <= 0) return false;
    *total += n;
    if (data->size() < cap) data->append(buf, std::min(static_cast<size_t>(n), cap - data->size()));
    return true;
  }
};

// The poll loop of one launch: feeds stdin, captures output, kills the tree at the bound and
// reaps the main process. It recomputes its deadline on every pass.
class Monitor {
 public:
  Monitor(pid_t pid, UniqueFd pidfd, Clock::time_point start, const Launch& launch,
          Observation& obs, std::function<void()> kill_tree);
  void Run(UniqueFd stdin_fd, UniqueFd stdout_fd, UniqueFd stderr_fd);

 private:
  void PollOnce();
  void FeedStdin();
  bool TryObserveExit();
  void DrainAfterExit();

  pid_t pid_;
  UniqueFd pidfd_;
  Clock::time_point start_, deadline_;
  const Launch& launch_;
  Observation& obs_;
  std::function<void()> kill_tree_;
  UniqueFd stdin_;
  size_t stdin_done_ = 0;
  Capture out_[2];
  bool exited_ = false;
};

Monitor::Monitor(pid_t pid, UniqueFd pidfd, Clock::time_point start, const Launch& launch,
                 Observation& obs, std::function<void()> kill_tree)
    : pid_(pid),
      pidfd_(std::move(pidfd)),
      start_(start),
      deadline_(start + std::chrono::milliseconds(launch.kill_after_ms)),
      launch_(launch),
      obs_(obs),
      kill_tree_(std::move(kill_tree)),
      out_{{UniqueFd(), &obs.stdout_data, &obs.stdout_bytes, launch.capture_bytes},
           {UniqueFd(), &obs.stderr_data, &obs.stderr_bytes, launch.capture_bytes}} {}

void Monitor::Run(UniqueFd stdin_fd, UniqueFd stdout_fd, UniqueFd stderr_fd) {
  SigpipeGuard guard;
  stdin_ = std::move(stdin_fd);
  out_[0].fd = std::move(stdout_fd);
  out_[1].fd = std::move(stderr_fd);
  for (int fd : {stdin_.get(), out_[0].fd.get(), out_[1].fd.get()}) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  if (launch_.stdin_data.empty()) stdin_.Reset();  // EOF at once
  while (!exited_) {
    if (Clock::now() >= deadline_) {
      kill_tree_();
      obs_.killed_by_net = true;
      // Again every so often: a v1 cgroup may have raced a fork, a process be in D state.
      deadline_ = Clock::now() + std::chrono::milliseconds(500);
    }
    PollOnce();
    if (!exited_) TryObserveExit();
  }
  DrainAfterExit();
}

void Monitor::PollOnce() {
  pollfd fds[4] = {{stdin_.get(), POLLOUT, 0},
                   {out_[0].fd.get(), POLLIN, 0},
                   {out_[1].fd.get(), POLLIN, 0},
                   {pidfd_.get(), POLLIN, 0}};
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
  // Without a pidfd (old kernels) exit is noticed by polling waitpid.
  int64_t cap = pidfd_.valid() ? left.count() : 20;
  int timeout = static_cast<int>(std::clamp<int64_t>(std::min(left.count() + 1, cap), 0, 1 << 30));
  if (poll(fds, 4, timeout) <= 0) return;
  if (fds[0].revents != 0) FeedStdin();
  for (int i = 0; i < 2; ++i) {
    if (fds[1 + i].revents != 0 && !out_[i].ReadOnce()) out_[i].fd.Reset();
  }
}

void Monitor::FeedStdin() {
  const std::string& data = launch_.stdin_data;
  ssize_t n = write(stdin_.get(), data.data() + stdin_done_, data.size() - stdin_done_);
  if (n > 0) stdin_done_ += static_cast<size_t>(n);
  // EPIPE: the launch closed its stdin, which is its business.
  if ((n < 0 && errno != EAGAIN && errno != EINTR) || stdin_done_ == data.size()) stdin_.Reset();
}

// WNOWAIT leaves the main process a zombie until the net goes: while it is unreaped its pid,
// which names the group and the session, cannot be recycled for a stranger that the net would
// then signal.
bool Monitor::TryObserveExit() {
  siginfo_t info{};
  if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
      info.si_pid != pid_) {
    return false;
  }
  exited_ = true;
  obs_.wall_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start_).count();
  if (info.si_code == CLD_EXITED) obs_.exit_code = info.si_status;
  if (info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED) obs_.signal = info.si_status;
  return true;
}

// What the main process wrote before it exited is in the pipes. A daemon may hold them open and
// keep writing, so reading stops at the first empty pipe or after a short while.
void Monitor::DrainAfterExit() {
  auto until = Clock::now() + std::chrono::milliseconds(200);
  for (auto& capture : out_) {
    while (capture.fd.valid() && Clock::now() < until) {
      pollfd p{capture.fd.get(), POLLIN, 0};
      if (poll(&p, 1, 0) <= 0 || !capture.ReadOnce()) break;
    }
  }
}

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

struct SafetyNet::State {
  explicit State(const NetLimits& limits) : cgroup(limits) {}
  NetCgroup cgroup;
  std::string warning;
  pid_t leader = -1;  // the launched process, unreaped: its pid is its group's and session's id
  bool launched = false;

  Expected<pid_t> Start(const smolvm_check::Launch& launch, const std::string& path,
                        UniqueFd stdio[3], Clock::time_point& start);
  void KillTree() const;
  void ReapLeader();
};

SafetyNet::SafetyNet(const NetLimits& limits) : state_(std::make_unique<State>(limits)) {
  const auto& problems = state_->cgroup.problems();
  if (!state_->cgroup.holds()) {
    state_->warning = fmt::format(
        "no cgroup ({}): the net is the process group and session alone, which a daemon can "
        "leave",
        fmt::join(problems, "; "));
  } else if (!problems.empty()) {
    state_->warning = fmt::format("cgroup without some limits: {}", fmt::join(problems, "; "));
  }
}

Expected<SafetyNet> SafetyNet::Create(const NetLimits& limits) { return SafetyNet(limits); }

SafetyNet::SafetyNet(SafetyNet&& other) noexcept = default;

SafetyNet::~SafetyNet() {
  if (!state_) return;  // moved from
  KillAll();
  state_->ReapLeader();  // before the cgroup goes
}

bool SafetyNet::has_cgroup() const { return state_->cgroup.holds(); }
const std::string& SafetyNet::warning() const { return state_->warning; }

std::vector<pid_t> SafetyNet::Remaining() const {
  if (state_->cgroup.holds()) return state_->cgroup.Procs();
  if (state_->leader <= 1) return {};
  return ScanTree(state_->leader);
}

void SafetyNet::KillAll() {
  state_->KillTree();
  if (state_->cgroup.holds()) return state_->cgroup.KillAndWait();
  if (state_->leader <= 1) return;
  for (int round = 0; round < 100; ++round) {
    auto left = ScanTree(state_->leader);
    if (left.empty()) return;
    for (pid_t pid : left) KillIfInTree(pid, state_->leader);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// The leader is unreaped until ReapLeader(), so -leader still names the launched group.
void SafetyNet::State::KillTree() const {
  cgroup.Kill();
  if (leader > 1) kill(-leader, SIGKILL);
}

void SafetyNet::State::ReapLeader() {
  if (leader <= 1) return;
  kill(leader, SIGKILL);
  while (waitpid(leader, nullptr, 0) < 0 && errno == EINTR) {
  }
  leader = -1;
}

Observation SafetyNet::Launch(const smolvm_check::Launch& launch) {
  Observation obs;
  obs.net_warning = state_->warning;
  auto fail = [&obs](const Error& e) {
    obs.error = e.ToString();
    return obs;
  };
  if (state_->launched) return fail(Error{"safety net", "launches once; make a new net", 0});
  if (auto ok = CheckLaunch(launch); !ok) return fail(ok.error());
  auto path = ResolveProgram(launch.argv[0], launch.env);
  if (!path) return fail(path.error());
  UniqueFd parent_ends[3];  // stdin writer, stdout reader, stderr reader
  Clock::time_point start;
  auto pid = state_->Start(launch, *path, parent_ends, start);
  if (!pid) return fail(pid.error());
  UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, *pid, 0)));
  Monitor monitor(*pid, std::move(pidfd), start, launch, obs, [this] { state_->KillTree(); });
  monitor.Run(std::move(parent_ends[0]), std::move(parent_ends[1]), std::move(parent_ends[2]));
  if (obs.signal != 0) obs.exit_code = -1;
  return obs;
}

// Forks the child, puts it in the cgroup and lets it exec; a failure before exec comes back as
// an error naming the step.
Expected<pid_t> SafetyNet::State::Start(const smolvm_check::Launch& launch, const std::string& path,
                                        UniqueFd parent_ends[3], Clock::time_point& start) {
  launched = true;
  std::optional<std::pair<UniqueFd, UniqueFd>> pipes[5];  // stdin, stdout, stderr, sync, report
  for (auto& p : pipes) {
    SMOLBOX_ASSIGN_OR_RETURN(auto made, Pipe());
    p = std::move(made);
  }
  std::vector<char*> argv = CStrings(launch.argv), envp = CStrings(launch.env);
  std::vector<int> keep = launch.inherited_fds;
  keep.push_back(pipes[4]->second.get());
  std::sort(keep.begin(), keep.end());
  keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
  ChildPlan plan{path.c_str(),
                 argv.data(),
                 envp.data(),
                 launch.cwd.empty() ? nullptr : launch.cwd.c_str(),
                 {pipes[0]->first.get(), pipes[1]->second.get(), pipes[2]->second.get()},
                 pipes[3]->first.get(),
                 pipes[4]->second.get(),
                 keep.data(),
                 keep.size(),
                 launch.inherited_fds.data(),
                 launch.inherited_fds.size()};
  start = Clock::now();
  pid_t pid = fork();
  if (pid < 0) return std::unexpected(Error::Sys("fork"));
  if (pid == 0) RunChild(plan);
  leader = pid;
  for (int i : {0, 3}) pipes[i]->first.Reset();
  for (int i : {1, 2, 4}) pipes[i]->second.Reset();
  auto abort_child = [this](const Error& e) -> Expected<pid_t> {
    ReapLeader();
    return std::unexpected(e);
  };
  if (auto added = cgroup.Add(pid); !added) return abort_child(added.error());
  if (write(pipes[3]->second.get(), "g", 1) != 1) return abort_child(Error::Sys("write sync pipe"));
  pipes[3]->second.Reset();
  Report report{};
  ssize_t n;
  while ((n = read(pipes[4]->first.get(), &report, sizeof report)) < 0 && errno == EINTR) {
  }
  if (n == sizeof report) {
    auto step = static_cast<Step>(report.step);
    std::string where = fmt::format("launch: {}", StepName(step));
    if (step == Step::kExecve) where += " " + path;
    if (step == Step::kChdir) where += " " + launch.cwd;
    return abort_child(Error{where, "", report.err});
  }
  parent_ends[0] = std::move(pipes[0]->second);
  parent_ends[1] = std::move(pipes[1]->first);
  parent_ends[2] = std::move(pipes[2]->first);
  return pid;
}

Observation LaunchInSafetyNet(const Launch& launch) {
  SafetyNet net;
  return net.Launch(launch);
}

}  // namespace smolvm_check
