#include "zygote.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <ranges>
#include <string_view>

#include "program.h"
#include "python_zygote_program.h"
#include "rlimits.h"

namespace smolbox::agent {
namespace {

using Clock = std::chrono::steady_clock;

// How long a ready zygote may take to fork an exec and report its pid. It is idle when asked,
// so this only bounds a zygote that an exec stopped (SIGSTOP) or that failed.
constexpr int kSpawnBoundMs = 5000;
// The largest request sent to the zygote, well under a socket's default send buffer: a larger
// one (a long argv or environment) runs as a plain exec, and the zygote stays.
constexpr size_t kMaxRequestBytes = 64 << 10;
// What Python reads as it starts, before the zygote could set an exec's environment: an exec
// whose values differ runs as before. Any PYTHON* variable does too.
constexpr std::array<std::string_view, 6> kStartupVariables = {"HOME",   "LANG",     "LANGUAGE",
                                                               "LC_ALL", "LC_CTYPE", "TZ"};

// The file execvp would run for argv0 under this PATH, resolved; empty when none.
std::string ResolveExecutable(const std::string& argv0, std::string_view path) {
  std::string found = argv0.find('/') != std::string::npos
                          ? argv0
                          : FindOnPath(std::string(path), argv0, EmptyPathEntry::kCurrentDir);
  char resolved[PATH_MAX];
  if (found.empty() || access(found.c_str(), X_OK) != 0 ||
      realpath(found.c_str(), resolved) == nullptr)
    return "";
  return resolved;
}

// Options the forked exec can still apply, as it starts: -u (unbuffered stdout and stderr) and
// -B (no .pyc written). Any other changes how the interpreter starts.
constexpr std::array<std::string_view, 2> kSettableOptions = {"-u", "-B"};

// python3 [-u] [-B] SCRIPT ARGS... or python3 [-u] [-B] -c CODE ARGS...: no -m, no stdin.
bool IsScriptOrCode(const std::vector<std::string>& argv) {
  size_t i = 1;
  while (i < argv.size() && std::ranges::find(kSettableOptions, argv[i]) != kSettableOptions.end())
    ++i;
  if (i >= argv.size()) return false;
  if (argv[i] == "-c") return i + 1 < argv.size();
  return !argv[i].empty() && argv[i][0] != '-';
}

bool SameStartupEnvironment(const ExecRequest& request, const ExecRequest& start) {
  for (const auto& [name, value] : request.env) {
    if (name.starts_with("PYTHON")) return false;
  }
  for (std::string_view name : kStartupVariables) {
    auto a = request.env.find(std::string(name));
    auto b = start.env.find(std::string(name));
    bool a_set = a != request.env.end(), b_set = b != start.env.end();
    if (a_set != b_set || (a_set && a->second != b->second)) return false;
  }
  return true;
}

std::string EncodeRequest(const ExecRequest& request) {
  nlohmann::json rlimits = nlohmann::json::array();
  RlimitPlan plan = PlanRlimits(request);
  for (size_t i = 0; i < plan.count; ++i) {
    const auto& entry = plan.entries[i];
    rlimits.push_back({entry.resource, entry.soft, entry.hard});
  }
  nlohmann::json j = {
      {"argv", request.argv}, {"env", request.env}, {"cwd", request.cwd}, {"rlimits", rlimits}};
  return j.dump();
}

// One message with the four fds the zygote takes for an exec.
Expected<void> SendRequest(int socket, const std::string& request, const std::array<int, 4>& fds) {
  iovec iov{const_cast<char*>(request.data()), request.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* header = CMSG_FIRSTHDR(&msg);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int) * 4);
  std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * 4);
  ssize_t sent;
  do {
    sent = sendmsg(socket, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (sent < 0 && errno == EINTR);
  if (sent != static_cast<ssize_t>(request.size()))
    return std::unexpected(Error::Sys("send to the zygote"));
  return {};
}

// The exec's process reports its pid, or "E <step>: <reason>", in one datagram.
Expected<std::string> ReadStatus(int fd) {
  pollfd p{fd, POLLIN, 0};
  int ready;
  do {
    ready = poll(&p, 1, kSpawnBoundMs);
  } while (ready < 0 && errno == EINTR);
  if (ready == 0) return std::unexpected(Error{"zygote", "no answer in time", ETIMEDOUT});
  char buffer[512];
  ssize_t n = read(fd, buffer, sizeof buffer);
  if (n <= 0)
    return std::unexpected(Error{"zygote", "the exec's process ended before it started", 0});
  return std::string(buffer, static_cast<size_t>(n));
}

}  // namespace

Expected<PythonZygote> PythonZygote::Start(const GuestSetup& setup, const SeccompProgram& seccomp,
                                           WorkloadCgroup cgroup, int workload_procs_fd) {
  ExecRequest start;
  start.argv = {"python3", "-c", std::string(kPythonZygoteProgram)};
  start.env = {{"PATH", std::string(kDefaultPath)}, {"HOME", setup.workdir}, {"LANG", "C.UTF-8"}};
  start.cwd = setup.workdir;
  start.uid = setup.uid;
  start.gid = setup.gid;
  std::string executable = ResolveExecutable(start.argv[0], kDefaultPath);
  if (executable.empty())
    return std::unexpected(Error{"prewarm python", "no python3 in the image", ENOENT});
  int control[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, control) != 0) {
    return std::unexpected(Error::Sys("socketpair for the zygote"));
  }
  UniqueFd ours(control[0]), theirs(control[1]);
  SMOLBOX_ASSIGN_OR_RETURN(Pipe ready, MakePipe());
  UniqueFd null(open("/dev/null", O_WRONLY | O_CLOEXEC));
  if (!null.valid()) return std::unexpected(Error::Sys("open /dev/null"));
  SMOLBOX_TRY(StartHelper(start, seccomp, cgroup.procs_fd(), workload_procs_fd, theirs.get(),
                          ready.write.get(), null.get()));
  if (fcntl(ready.read.get(), F_SETFL, O_NONBLOCK) != 0)
    return std::unexpected(Error::Sys("fcntl(O_NONBLOCK)"));
  return PythonZygote(std::move(ours), std::move(ready.read), std::move(cgroup), std::move(start),
                      std::move(executable));
}

bool PythonZygote::Ready() {
  if (!ready_seen_ && !stopped_) {
    char byte = 0;
    ssize_t n = read(ready_.get(), &byte, 1);
    if (n == 1 && byte == 'r') ready_seen_ = true;
    // EOF: it ended before it was ready (no python3 modules, a failed prctl).
    if (n == 0) Stop();
  }
  return ready_seen_ && !stopped_;
}

bool PythonZygote::Accepts(const ExecRequest& request) {
  return Ready() && request.uid == start_.uid && request.gid == start_.gid &&
         IsScriptOrCode(request.argv) && SameStartupEnvironment(request, start_) &&
         ResolveExecutable(request.argv[0], SearchPathOf(request)) == executable_;
}

void PythonZygote::Stop() {
  stopped_ = true;
  control_.Reset();
  cgroup_.Kill();  // the zygote and any fork of it not yet in the workload cgroup
}

std::optional<std::expected<Workload, ExecReport>> PythonZygote::Spawn(const ExecRequest& request,
                                                                       int workload_procs_fd) {
  std::string encoded = EncodeRequest(request);
  if (encoded.size() > kMaxRequestBytes) return std::nullopt;
  Workload workload;
  getrusage(RUSAGE_CHILDREN, &workload.children_before);
  workload.started = Clock::now();
  auto pipes = MakeWorkloadPipes();
  int status[2];
  if (!pipes || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, status) != 0) {
    return std::unexpected(
        ExecFailure(Status::kInternalError, "pipes for the zygote's exec", workload.started));
  }
  UniqueFd status_ours(status[0]), status_theirs(status[1]);
  auto sent = SendRequest(
      control_.get(), encoded,
      {pipes->in.read.get(), pipes->out.write.get(), pipes->err.write.get(), status_theirs.get()});
  // The zygote holds its own copies now; the agent must not, or it would never see EOF.
  for (Pipe* pipe : {&pipes->out, &pipes->err}) pipe->write.Reset();
  pipes->in.read.Reset();
  status_theirs.Reset();
  if (!sent) {
    fmt::print(stderr, "smolbox-agent: {}; execs run without it from now on\n",
               sent.error().ToString());
    Stop();
    return std::nullopt;
  }
  auto answer = ReadStatus(status_ours.get());
  if (!answer) {
    fmt::print(stderr, "smolbox-agent: {}; execs run without it from now on\n",
               answer.error().ToString());
    Stop();
    return std::nullopt;
  }
  if (answer->starts_with("E ")) {
    return std::unexpected(ExecFailure(Status::kSetupError, answer->substr(2), workload.started));
  }
  pid_t pid = 0;
  auto [end, ec] = std::from_chars(answer->data(), answer->data() + answer->size(), pid);
  if (ec != std::errc() || end != answer->data() + answer->size() || pid <= 1) {
    Stop();
    return std::unexpected(
        ExecFailure(Status::kInternalError, "the zygote's exec sent no pid", workload.started));
  }
  // Into the workload cgroup before its first instruction of the exec's code: from here on its
  // memory, pids and CPU count, and the exec's kill reaches it.
  std::string text = std::to_string(pid);
  if (write(workload_procs_fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
      write(status_ours.get(), "g", 1) != 1) {
    auto error = Error::Sys("start the zygote's exec");
    kill(pid, SIGKILL);
    return std::unexpected(ExecFailure(Status::kInternalError, error.ToString(), workload.started));
  }
  workload.pid = pid;
  workload.stdin_fd = std::move(pipes->in.write);
  workload.stdout_fd = std::move(pipes->out.read);
  workload.stderr_fd = std::move(pipes->err.read);
  return workload;
}

}  // namespace smolbox::agent
