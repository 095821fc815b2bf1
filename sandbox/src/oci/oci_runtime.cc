#include "oci_runtime.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "container_monitor.h"
#include "exec_monitor.h"
#include "host_root.h"
#include "oci_config.h"
#include "oci_hooks.h"
#include "oci_state.h"
#include "state.h"
#include "unique_fd.h"

namespace smolbox::oci {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// How long delete waits for a monitor it asked to end before it kills it outright.
constexpr auto kEndWait = std::chrono::seconds(10);

std::string Now() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  tm utc{};
  gmtime_r(&now.tv_sec, &utc);
  char text[64];
  strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  return fmt::format("{}.{:09d}Z", text, now.tv_nsec);
}

// Errors and notes go to stderr, and to --log as engines read it: runc's JSON lines with
// --log-format json ({"level":"error","msg":"...","time":"..."}), else text lines.
// Notes (what smolbox replaced) go to the log, and to stderr only when a person reads it: an
// engine shows the runtime's stderr as its error, and every engine's config sets fields that
// smolbox replaces.
void Log(const GlobalOptions& global, const std::string& level, const std::string& message) {
  if (level == "error" || (global.log.empty() && isatty(STDERR_FILENO))) {
    fmt::print(stderr, "smolbox oci: {}{}\n", level == "error" ? "" : level + ": ", message);
  }
  if (global.log.empty()) return;
  int fd = open(global.log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;
  std::string line = global.json_log
                         ? json{{"level", level}, {"msg", message}, {"time", Now()}}.dump() + "\n"
                         : fmt::format("time=\"{}\" level={} msg={:?}\n", Now(), level, message);
  (void)!write(fd, line.data(), line.size());
  close(fd);
}

int Refuse(const GlobalOptions& global, const Error& error) {
  Log(global, "error", error.ToString());
  return 1;
}

std::string RootOf(const GlobalOptions& global) {
  return global.root.empty() ? DefaultRoot() : global.root;
}

// A container whose create never finished (its runtime or monitor killed on the way) is
// removed by the next call that meets it: nothing is left for the engine to clean.
bool SweepIfStale(const ContainerDir& dir) {
  auto state = dir.Read();
  bool stale = state ? state->status == ContainerStatus::kCreating &&
                           Observe(*state) == ContainerStatus::kStopped
                     : !std::filesystem::exists(dir.path() + "/state.json");
  if (stale) {
    (void)dir.Remove();
    shared::SweepStaleRuns();
  }
  return stale;
}

Expected<ContainerState> Find(const GlobalOptions& global, const std::string& id) {
  SMOLBOX_TRY(CheckContainerId(id));
  ContainerDir dir = ContainerDir::At(RootOf(global), id);
  if (!dir.Exists() || SweepIfStale(dir)) {
    return std::unexpected(Error::Field("container " + id, "does not exist"));
  }
  return dir.Read();
}

// A file of at most kMaxConfigBytes (one more is read, so that the parser refuses a larger one).
Expected<std::string> ReadBoundedFile(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::unexpected(Error::Sys("open " + path));
  std::string text(kMaxConfigBytes + 1, '\0');
  size_t size = 0;
  for (ssize_t n;
       size < text.size() && (n = read(fd.get(), text.data() + size, text.size() - size)) != 0;
       size += size_t(n)) {
    if (n < 0) return std::unexpected(Error::Sys("read " + path));
  }
  text.resize(size);
  return text;
}

Expected<std::string> ReadConfig(const std::string& bundle) {
  return ReadBoundedFile(bundle + "/config.json");
}

// What a monitor's ready pipe says, to its end.
std::string ReadAll(UniqueFd fd) {
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = read(fd.get(), buffer, sizeof buffer)) > 0;) text.append(buffer, size_t(n));
  return text;
}

// A monitor's exit status, as a shell would report its process's.
int WaitForExit(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Expected<void> WritePidFile(const std::string& path, pid_t pid) {
  if (path.empty()) return {};
  std::string temporary = fmt::format("{}.{}.tmp", path, getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << pid;
    if (!out) return std::unexpected(Error::Sys("write " + temporary));
  }
  if (rename(temporary.c_str(), path.c_str()) != 0)
    return std::unexpected(Error::Sys("rename to " + path));
  return {};
}

// A pidfd for the container's monitor, only while it is the process the state names.
Expected<UniqueFd> OpenMonitor(const ContainerState& state) {
  UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, state.pid, 0)));
  if (!pidfd.valid() || Observe(state) == ContainerStatus::kStopped) {
    return std::unexpected(Error::Field("container " + state.id, "is not running"));
  }
  return pidfd;
}

bool WaitGone(int pidfd, std::chrono::milliseconds limit) {
  pollfd fd{pidfd, POLLIN, 0};
  return poll(&fd, 1, static_cast<int>(limit.count())) > 0;
}

Expected<int> ParseSignal(const std::string& text) {
  static const std::map<std::string, int> names = {
      {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
      {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"PIPE", SIGPIPE}, {"ALRM", SIGALRM},
      {"TERM", SIGTERM}, {"CONT", SIGCONT}, {"STOP", SIGSTOP}, {"WINCH", SIGWINCH},
      {"CHLD", SIGCHLD}, {"URG", SIGURG}};
  std::string name = text.starts_with("SIG") ? text.substr(3) : text;
  if (auto it = names.find(name); it != names.end()) return it->second;
  int number = 0;
  auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), number);
  if (ec == std::errc{} && end == name.data() + name.size() && number > 0 && number < 65)
    return number;
  return std::unexpected(Error::Field("signal", fmt::format("{:?} is not a signal", text)));
}

// The spec's poststop, from the bundle's config as it is now; a failure is only logged, and a
// bundle the engine already removed has none to run.
void RunPoststopHooks(const GlobalOptions& global, const ContainerState& state) {
  auto text = ReadConfig(state.bundle);
  if (!text) return;
  json config = json::parse(*text, nullptr, false);
  if (!config.is_object() || !config.contains("hooks") || !config["hooks"].is_object()) return;
  auto hooks = ParseHooks(config["hooks"]);
  if (!hooks) return Log(global, "warning", hooks.error().ToString());
  if (auto ran = RunHooks(hooks->poststop, "poststop", StateJson(state, ContainerStatus::kStopped));
      !ran) {
    Log(global, "warning", ran.error().ToString());
  }
}

// Creates the container; its monitor is this process's child. Returns the monitor's pid.
Expected<pid_t> CreateContainer(const GlobalOptions& global, const CreateOptions& options) {
  SMOLBOX_TRY(CheckContainerId(options.id));
  std::error_code ec;
  std::string bundle = std::filesystem::absolute(options.bundle.empty() ? "." : options.bundle, ec)
                           .lexically_normal()
                           .string();
  if (!bundle.empty() && bundle.size() > 1 && bundle.back() == '/') bundle.pop_back();
  SMOLBOX_ASSIGN_OR_RETURN(auto text, ReadConfig(bundle));
  SMOLBOX_ASSIGN_OR_RETURN(auto container, ParseOciConfig(text, bundle, global.backend));
  // An engine's rootfs is owned by host ids as the engine unpacked it; a root runtime shows them
  // to the sandbox as its own (rootless, the engine's user owns them and is mapped already).
  container.run.sandbox.map_image_ids = IsHostRoot();
  for (const auto& note : container.notes) Log(global, "warning", note);
  ContainerDir dir = ContainerDir::At(RootOf(global), options.id);
  if (dir.Exists()) SweepIfStale(dir);
  SMOLBOX_TRY(dir.Create());
  ContainerState state;
  state.id = options.id;
  state.bundle = bundle;
  state.created = Now();
  state.annotations = container.annotations;
  // Until the monitor writes its own, the state names this create, so that a concurrent call
  // does not take the container for a create that died.
  state.pid = getpid();
  state.pid_start = shared::ProcessStartTime(state.pid).value_or(0);
  auto made = dir.Write(state);
  if (made && mkfifo(dir.fifo().c_str(), 0600) != 0)
    made = std::unexpected(Error::Sys("mkfifo " + dir.fifo()));
  int ready[2];
  if (made && pipe2(ready, O_CLOEXEC) != 0) made = std::unexpected(Error::Sys("pipe"));
  if (!made) {
    (void)dir.Remove();
    return std::unexpected(made.error());
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    // Its own session: the engine's terminal signals reach the container through kill only.
    setsid();
    RunMonitor(MonitorPlan{std::move(container), dir, state, options.console_socket, ready[1]});
  }
  close(ready[1]);
  std::string reply = ReadAll(UniqueFd(ready[0]));
  if (pid < 0 || reply != "\n") {
    if (pid > 0) waitpid(pid, nullptr, 0);
    (void)dir.Remove();
    if (pid < 0) return std::unexpected(Error::Sys("fork the container's monitor"));
    if (!reply.empty() && reply.back() == '\n') reply.pop_back();
    return std::unexpected(Error{
        "create", reply.empty() ? "the container's monitor died while starting it" : reply, 0});
  }
  SMOLBOX_TRY(WritePidFile(options.pid_file, pid));
  return pid;
}

// exec's process: --process's file, or the config's process with the command and flags over it,
// as runc builds it. Either way it is mapped as a config's process is.
Expected<OciProcess> ExecProcess(const ExecOptions& options, const std::string& config_text,
                                 const RunSpec& container) {
  if (!options.process.empty()) {
    SMOLBOX_ASSIGN_OR_RETURN(auto text, ReadBoundedFile(options.process));
    return ParseOciProcess(text, container);
  }
  if (options.args.empty())
    return std::unexpected(Error::Field("exec", "needs a command, or --process"));
  json process = json::parse(config_text, nullptr, false).value("process", json::object());
  process["args"] = options.args;
  process["terminal"] = options.tty;
  if (!options.cwd.empty()) process["cwd"] = options.cwd;
  json env = process.value("env", json::array());
  for (const auto& entry : options.env) env.push_back(entry);
  process["env"] = env;
  if (!options.user.empty()) {
    size_t colon = options.user.find(':');
    uint32_t ids[2] = {0, 0};
    std::string parts[2] = {options.user.substr(0, colon),
                            colon == std::string::npos ? "0" : options.user.substr(colon + 1)};
    for (int i = 0; i < 2; ++i) {
      auto [end, ec] = std::from_chars(parts[i].data(), parts[i].data() + parts[i].size(), ids[i]);
      if (ec != std::errc{} || end != parts[i].data() + parts[i].size() || parts[i].empty())
        return std::unexpected(
            Error::Field("--user", fmt::format("must be UID[:GID] (got {:?})", options.user)));
    }
    process["user"] = {{"uid", ids[0]}, {"gid", ids[1]}};
  }
  return ParseOciProcess(process.dump(), container);
}

}  // namespace

int Create(const GlobalOptions& global, const CreateOptions& options) {
  auto created = CreateContainer(global, options);
  return created ? 0 : Refuse(global, created.error());
}

int Start(const GlobalOptions& global, const std::string& id) {
  auto state = Find(global, id);
  if (!state) return Refuse(global, state.error());
  ContainerStatus now = Observe(*state);
  if (now != ContainerStatus::kCreated) {
    return Refuse(global,
                  Error::Field("container " + id,
                               fmt::format("cannot start a container that is {}", ToString(now))));
  }
  ContainerDir dir = ContainerDir::At(RootOf(global), id);
  UniqueFd fifo(open(dir.fifo().c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW));
  if (!fifo.valid() || write(fifo.get(), "s", 1) != 1)
    return Refuse(global, Error::Sys("write " + dir.fifo()));
  // The process has started once the monitor says so; start returns no sooner, as runc's.
  auto deadline = Clock::now() + kEndWait;
  while (Clock::now() < deadline) {
    auto after = dir.Read();
    if (!after || Observe(*after) != ContainerStatus::kCreated) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return Refuse(global, Error::Field("container " + id, "did not start within 10 s"));
}

int State(const GlobalOptions& global, const std::string& id) {
  auto state = Find(global, id);
  if (!state) return Refuse(global, state.error());
  fmt::print("{}\n", StateJson(*state, Observe(*state)));
  return 0;
}

int Kill(const GlobalOptions& global, const std::string& id, const std::string& signal_name) {
  auto signal = ParseSignal(signal_name);
  if (!signal) return Refuse(global, signal.error());
  auto state = Find(global, id);
  if (!state) return Refuse(global, state.error());
  auto pidfd = OpenMonitor(*state);
  if (!pidfd) return Refuse(global, pidfd.error());
  if (syscall(SYS_pidfd_send_signal, pidfd->get(), *signal, nullptr, 0) != 0) {
    return Refuse(global, Error::Sys("signal the container " + id));
  }
  return 0;
}

int Delete(const GlobalOptions& global, const std::string& id, bool force) {
  auto state = Find(global, id);
  // As runc: a forced delete of a container that is gone has nothing to do, and succeeds.
  if (!state && force && !ContainerDir::At(RootOf(global), id).Exists() && CheckContainerId(id))
    return 0;
  if (!state) return Refuse(global, state.error());
  ContainerStatus now = Observe(*state);
  if (now == ContainerStatus::kRunning && !force) {
    return Refuse(global, Error::Field("container " + id,
                                       "cannot delete a container that is running (use --force)"));
  }
  if (now != ContainerStatus::kStopped) {
    // Asked first, so that the monitor tears its sandbox down itself; killed if it does not.
    if (auto pidfd = OpenMonitor(*state)) {
      syscall(SYS_pidfd_send_signal, pidfd->get(), SIGTERM, nullptr, 0);
      if (!WaitGone(pidfd->get(), kEndWait)) {
        syscall(SYS_pidfd_send_signal, pidfd->get(), SIGKILL, nullptr, 0);
        WaitGone(pidfd->get(), kEndWait);
      }
    }
  }
  RunPoststopHooks(global, *state);
  auto removed = ContainerDir::At(RootOf(global), id).Remove();
  shared::SweepStaleRuns();
  return removed ? 0 : Refuse(global, removed.error());
}

int Run(const GlobalOptions& global, const CreateOptions& options, bool detach) {
  auto pid = CreateContainer(global, options);
  if (!pid) return Refuse(global, pid.error());
  if (int started = Start(global, options.id); started != 0) {
    Delete(global, options.id, true);
    return started;
  }
  if (detach) return 0;
  int code = WaitForExit(*pid);
  Delete(global, options.id, true);
  return code;
}

int Ps(const GlobalOptions& global, const std::string& id, bool as_json) {
  auto state = Find(global, id);
  if (!state) return Refuse(global, state.error());
  // The container's processes are its monitor's descendants (the agent, the workload's tree).
  std::map<pid_t, pid_t> parent_of;
  std::map<pid_t, std::string> command_of;
  std::unique_ptr<DIR, int (*)(DIR*)> proc(opendir("/proc"), closedir);
  for (dirent* entry; proc && (entry = readdir(proc.get()));) {
    pid_t pid = atoi(entry->d_name);
    if (pid <= 0) continue;
    std::ifstream stat(fmt::format("/proc/{}/stat", pid));
    std::string line;
    if (!std::getline(stat, line)) continue;
    size_t close_paren = line.rfind(')');
    if (close_paren == std::string::npos || close_paren + 4 > line.size()) continue;
    parent_of[pid] = atoi(line.c_str() + close_paren + 4);
    command_of[pid] = line.substr(line.find('(') + 1, close_paren - line.find('(') - 1);
  }
  std::vector<pid_t> pids;
  bool running = Observe(*state) != ContainerStatus::kStopped;
  for (const auto& [pid, parent] : parent_of) {
    for (pid_t up = pid; running && up > 1; up = parent_of.contains(up) ? parent_of[up] : 0) {
      if (up == state->pid && pid != state->pid) {
        pids.push_back(pid);
        break;
      }
    }
  }
  if (as_json) {
    fmt::print("{}\n", json(pids).dump());
  } else {
    fmt::print("PID CMD\n");
    for (pid_t pid : pids) fmt::print("{} {}\n", pid, command_of[pid]);
  }
  return 0;
}

int Features() {
  json features = {
      {"ociVersionMin", kOciVersionMin},
      {"ociVersionMax", kOciVersionMax},
      {"hooks", json::array()},
      {"mountOptions",
       {"bind", "rbind", "ro", "rw", "nosuid", "nodev", "noexec", "private", "rprivate"}},
      {"linux",
       {{"namespaces", {"pid", "network", "mount", "ipc", "uts", "user"}},
        {"capabilities", json::array()},
        {"cgroup", {{"v1", true}, {"v2", true}, {"systemd", false}, {"systemdUser", false}}},
        {"seccomp",
         {{"enabled", true},
          {"actions", json::array()},
          {"operators", json::array()},
          {"archs", json::array()}}},
        {"apparmor", {{"enabled", false}}},
        {"selinux", {{"enabled", false}}}}},
      {"annotations",
       {{"io.smolbox.backends", "ns,vm"},
        {"io.smolbox.annotations",
         fmt::format("{},{},{},{},{},{},{}", kBackendAnnotation, kAccelAnnotation,
                     kStorageAnnotation, kOutputAnnotation, kTimeoutAnnotation, kCpuTimeAnnotation,
                     kEgressAnnotation)}}},
  };
  fmt::print("{}\n", features.dump(2));
  return 0;
}

int Exec(const GlobalOptions& global, const ExecOptions& options) {
  auto state = Find(global, options.id);
  if (!state) return Refuse(global, state.error());
  if (ContainerStatus now = Observe(*state); now != ContainerStatus::kRunning) {
    return Refuse(
        global, Error::Field("container " + options.id,
                             fmt::format("cannot exec in a container that is {}", ToString(now))));
  }
  auto config = ReadConfig(state->bundle);
  auto container = config ? ParseOciConfig(*config, state->bundle, global.backend)
                          : std::unexpected(config.error());
  if (!container) return Refuse(global, container.error());
  if (container->run.sandbox.backend == BackendKind::kVm) {
    return Refuse(global,
                  Error::Field("exec", "the vm backend does not take a second process yet"));
  }
  auto process = ExecProcess(options, *config, container->run);
  if (!process) return Refuse(global, process.error());
  for (const auto& note : process->notes) Log(global, "warning", note);
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) return Refuse(global, Error::Sys("pipe"));
  pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    setsid();
    RunExecMonitor(ExecPlan{ContainerDir::At(RootOf(global), options.id).attach_socket(),
                            container->run.sandbox, std::move(*process), options.console_socket,
                            ready[1]});
  }
  close(ready[1]);
  if (pid < 0) {
    close(ready[0]);
    return Refuse(global, Error::Sys("fork the exec's monitor"));
  }
  std::string reply = ReadAll(UniqueFd(ready[0]));
  if (reply != "\n") {
    waitpid(pid, nullptr, 0);
    if (!reply.empty() && reply.back() == '\n') reply.pop_back();
    return Refuse(global, Error{"exec", reply.empty() ? "the exec's monitor died" : reply, 0});
  }
  if (auto written = WritePidFile(options.pid_file, pid); !written)
    return Refuse(global, written.error());
  return options.detach ? 0 : WaitForExit(pid);
}

}  // namespace smolbox::oci
