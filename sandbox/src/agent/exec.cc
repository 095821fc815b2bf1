#include "exec.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <ranges>
#include <string>
#include <string_view>
#include <vector>

#include "child.h"
#include "reaper.h"
#include "rlimits.h"

namespace smolbox::agent {
namespace {

using Clock = std::chrono::steady_clock;

// The PATH search, done here because the child must not allocate. It searches the request's
// PATH, never the agent's: the workload's environment is exactly the request's.
std::vector<std::string> ExecCandidates(const ExecRequest& request) {
  const std::string& argv0 = request.argv.front();
  if (argv0.empty()) return {};
  if (argv0.find('/') != std::string::npos) return {argv0};
  std::vector<std::string> candidates;
  for (auto element : std::views::split(SearchPathOf(request), ':')) {
    std::string_view dir(element.begin(), element.end());
    // An empty element is the current directory, as POSIX has it.
    candidates.push_back(fmt::format("{}/{}", dir.empty() ? "." : dir, argv0));
  }
  return candidates;
}

// The strings and null-terminated pointer arrays execve takes, built before fork.
class ExecImage {
 public:
  explicit ExecImage(const ExecRequest& request)
      : args_(request.argv), candidates_(ExecCandidates(request)) {
    for (const auto& [name, value] : request.env) env_.push_back(name + "=" + value);
    for (std::string& arg : args_) argv_.push_back(arg.data());
    for (std::string& entry : env_) envp_.push_back(entry.data());
    for (const std::string& path : candidates_) candidate_ptrs_.push_back(path.c_str());
    argv_.push_back(nullptr);
    envp_.push_back(nullptr);
    candidate_ptrs_.push_back(nullptr);
  }

  char* const* argv() const { return argv_.data(); }
  char* const* envp() const { return envp_.data(); }
  const char* const* candidates() const { return candidate_ptrs_.data(); }

 private:
  std::vector<std::string> args_;
  std::vector<std::string> env_;
  std::vector<std::string> candidates_;
  std::vector<char*> argv_;
  std::vector<char*> envp_;
  std::vector<const char*> candidate_ptrs_;
};

Expected<void> SetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return std::unexpected(Error::Sys("fcntl(O_NONBLOCK)"));
  }
  return {};
}

ChildPlan MakePlan(const ExecRequest& request, const SeccompProgram& seccomp, const WorkloadPipes& pipes,
                   const ExecImage& image) {
  ChildPlan plan;
  plan.stdin_fd = pipes.in.read.get();
  plan.stdout_fd = pipes.out.write.get();
  plan.stderr_fd = pipes.err.write.get();
  plan.error_fd = pipes.error.write.get();
  plan.cwd = request.cwd.c_str();
  plan.uid = request.uid;
  plan.gid = request.gid;
  plan.rlimits = PlanRlimits(request);
  plan.seccomp = &seccomp;
  plan.argv0 = request.argv.front().c_str();
  plan.argv = image.argv();
  plan.envp = image.envp();
  plan.candidates = image.candidates();
  plan.searched_path = request.argv.front().find('/') == std::string::npos;
  return plan;
}

// Blocks until the child reaches execve (EOF: the CLOEXEC pipe closed) or reports a failed
// step. Bounded: no workload code runs before execve.
Expected<std::optional<SetupFailure>> AwaitExec(int error_fd) {
  SetupFailure failure;
  ssize_t n;
  do {
    n = read(error_fd, &failure, sizeof failure);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return std::unexpected(Error::Sys("read error pipe"));
  if (n == 0) return std::nullopt;
  if (n != sizeof failure) return std::unexpected(Error{"error pipe", "short record", 0});
  return failure;
}

std::string Describe(const SetupFailure& failure, const ExecRequest& request) {
  std::string step(StepName(failure.step));
  if (failure.step == SetupStep::kChdir) step += " " + request.cwd;
  if (failure.step == SetupStep::kSetresuid) step += fmt::format(" {}", request.uid);
  if (failure.step == SetupStep::kSetresgid) step += fmt::format(" {}", request.gid);
  return fmt::format("{}: {}", step, std::strerror(failure.err));
}

// The child never became the workload: collect it, and say why.
ExecReport Abandon(pid_t pid, const Expected<std::optional<SetupFailure>>& failure,
                   const ExecRequest& request, Clock::time_point started) {
  if (!failure) KillWorkloads(pid);
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  if (!failure) return ExecFailure(Status::kInternalError, failure.error().ToString(), started);
  return ExecFailure(Status::kSetupError, Describe(**failure, request), started);
}

}  // namespace

std::string_view SearchPathOf(const ExecRequest& request) {
  auto path = request.env.find("PATH");
  return path != request.env.end() ? std::string_view(path->second) : kDefaultPath;
}

ExecReport ExecFailure(Status status, std::string error, std::chrono::steady_clock::time_point started) {
  ExecReport report;
  report.status = status;
  report.error = std::move(error);
  report.wall_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
  return report;
}

Expected<Pipe> MakePipe() {
  int fds[2];
  // CLOEXEC on every end: the child's dup2 copies onto 0-2 are the only ones execve keeps.
  if (pipe2(fds, O_CLOEXEC) != 0) return std::unexpected(Error::Sys("pipe2"));
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

Expected<WorkloadPipes> MakeWorkloadPipes() {
  WorkloadPipes pipes;
  for (Pipe* pipe : {&pipes.in, &pipes.out, &pipes.err, &pipes.error}) {
    SMOLBOX_ASSIGN_OR_RETURN(auto made, MakePipe());
    *pipe = std::move(made);
  }
  // Only the agent's stdio ends: the workload gets ordinary blocking pipes.
  for (int fd : {pipes.in.write.get(), pipes.out.read.get(), pipes.err.read.get()}) {
    SMOLBOX_TRY(SetNonBlocking(fd));
  }
  return pipes;
}

Expected<pid_t> StartHelper(const ExecRequest& request, const SeccompProgram& seccomp, int cgroup_procs_fd,
                            int cgroup_ns_root_procs_fd, int stdin_fd, int stdout_fd, int stderr_fd) {
  SMOLBOX_ASSIGN_OR_RETURN(Pipe error, MakePipe());
  ExecImage image(request);
  WorkloadPipes unused;
  ChildPlan plan = MakePlan(request, seccomp, unused, image);
  plan.stdin_fd = stdin_fd;
  plan.stdout_fd = stdout_fd;
  plan.stderr_fd = stderr_fd;
  plan.error_fd = error.write.get();
  plan.cgroup_procs_fd = cgroup_procs_fd;
  plan.cgroup_ns_root_procs_fd = cgroup_ns_root_procs_fd;
  pid_t pid = fork();
  if (pid < 0) return std::unexpected(Error::Sys("fork"));
  if (pid == 0) RunChild(plan);
  error.write.Reset();
  auto failure = AwaitExec(error.read.get());
  if (!failure || *failure) {
    ExecReport report = Abandon(pid, failure, request, Clock::now());
    return std::unexpected(Error{"start " + request.argv.front(), report.error, 0});
  }
  return pid;
}

std::expected<Workload, ExecReport> StartWorkload(const ExecRequest& request,
                                                  const SeccompProgram& seccomp,
                                                  int cgroup_procs_fd) {
  auto pipes = MakeWorkloadPipes();
  if (!pipes)
    return std::unexpected(ExecFailure(Status::kInternalError, pipes.error().ToString(), Clock::now()));
  ExecImage image(request);
  ChildPlan plan = MakePlan(request, seccomp, *pipes, image);
  plan.cgroup_procs_fd = cgroup_procs_fd;
  Workload workload;
  getrusage(RUSAGE_CHILDREN, &workload.children_before);
  workload.started = Clock::now();
  pid_t pid = fork();
  if (pid < 0) {
    return std::unexpected(
        ExecFailure(Status::kInternalError, Error::Sys("fork").ToString(), workload.started));
  }
  if (pid == 0) RunChild(plan);
  workload.pid = pid;
  // Close the child's ends here, or the agent would never see EOF on any of them.
  for (Pipe* pipe : {&pipes->out, &pipes->err, &pipes->error}) pipe->write.Reset();
  pipes->in.read.Reset();
  auto failure = AwaitExec(pipes->error.read.get());
  if (!failure || *failure)
    return std::unexpected(Abandon(pid, failure, request, workload.started));
  workload.stdin_fd = std::move(pipes->in.write);
  workload.stdout_fd = std::move(pipes->out.read);
  workload.stderr_fd = std::move(pipes->err.read);
  return workload;
}

}  // namespace smolbox::agent
