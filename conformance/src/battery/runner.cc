#include "battery/runner.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "battery/canaries.h"
#include "battery/case_dir.h"
#include "battery/profile_server.h"
#include "json_bounds.h"
#include "launch/host_files.h"
#include "launch/http_call.h"
#include "launch/launcher.h"
#include "launch/smolbox_install.h"

namespace smolvm_check {
namespace {

namespace fs = std::filesystem;

// How long a case may run before the safety net kills it, past what the case allows itself.
constexpr int64_t kNetSlackMs = 4000;
// Daemons get this long after the run to show themselves to the leftovers oracle.
constexpr int64_t kSettleMs = 300;
// The most of a stream kept from a sandbox; so also the most of its stdout read as its result.
constexpr int64_t kMaxCaptureBytes = 64 << 20;

std::string RandomMarker() {
  std::random_device rd;
  return fmt::format("smolvm-check-marker-{:08x}{:08x}", rd(), rd());
}

// The case as judged under this profile: its wall-time bound covers the profile's startup.
Case WithStartupAllowance(const Case& c, const Profile& profile) {
  Case judged = c;
  if (judged.expect.max_wall_ms > 0) judged.expect.max_wall_ms += profile.startup_allowance_ms;
  return judged;
}

int64_t NetBoundMs(const Case& c) {
  int64_t allowed = std::max(c.expect.max_wall_ms, c.Limit("timeout_ms"));
  return allowed * 2 + kNetSlackMs;
}

// A hint a case needs but this host cannot give (the test host needs root).
std::optional<std::string> MissingHint(const Case& c, const std::map<std::string, std::string>& hints) {
  static const std::vector<std::string> kHints = {"testhost_ip", "testhost_port"};
  for (const auto& arg : c.args) {
    for (const auto& name : kHints) {
      if (arg.find("{" + name + "}") != std::string::npos && !hints.contains(name)) {
        return fmt::format("needs {{{}}}, which needs root to set up", name);
      }
    }
  }
  return std::nullopt;
}

std::string ProcCmdline(const std::string& pid) {
  std::string text = ReadUpTo("/proc/" + pid + "/cmdline", 64 * 1024);
  std::replace(text.begin(), text.end(), '\0', ' ');
  return text;
}

// Processes still carrying the case's marker, and mounts naming its directory.
std::vector<std::string> FindLeftovers(const std::string& marker, const std::string& case_root) {
  std::vector<std::string> found;
  std::string self = std::to_string(getpid());
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    std::string pid = entry.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos || pid == self) continue;
    std::string cmdline = ProcCmdline(pid);
    if (cmdline.find(marker) != std::string::npos) {
      found.push_back(fmt::format("process {} ({})", pid, cmdline.substr(0, 80)));
    }
  }
  std::ifstream mountinfo("/proc/self/mountinfo");
  for (std::string line; std::getline(mountinfo, line);) {
    if (line.find(case_root) != std::string::npos || line.find(marker) != std::string::npos) {
      found.push_back("mount " + line.substr(0, 120));
    }
  }
  return found;
}

// smolbox's per-run state whose runtime is gone: a temp directory the run left behind. Other
// cases' runs, still live under -j, have a live owner.
std::vector<std::string> StaleSandboxState(const Profile& profile) {
  std::vector<std::string> stale;
  if (!profile.smolbox_json) return stale;
  std::error_code ec;
  for (const auto& run : fs::directory_iterator("/run/smolbox/runs", ec)) {
    std::ifstream owner(run.path() / "owner");
    int pid = 0;
    if (owner >> pid && pid > 0 && fs::exists(fmt::format("/proc/{}", pid))) continue;
    // A run dir is made under a staging name and renamed when whole: one listed a moment ago
    // may be gone by now, renamed or removed by its runtime.
    if (!fs::exists(run.path(), ec)) continue;
    if (!owner && fs::last_write_time(run.path(), ec) > fs::file_time_type::clock::now() - std::chrono::minutes(1)) {
      continue;  // being created right now
    }
    stale.push_back("temp dir " + run.path().string());
  }
  return stale;
}

// This program, for an http profile's http-call.
std::string SelfExe() {
  std::string self = ThisExecutable();
  return self.empty() ? "/proc/self/exe" : self;
}

// An http profile's battery: its payloads copied beneath the volume root (the work root, which
// holds every case's directories), then its server started there, in the test internet's
// uplink when there is one, so that the sandboxes' egress gateway dials from it. What fails is
// told by every case (server_unavailable).
std::unique_ptr<ProfileServer> StartHttpProfile(const Profile& profile, const std::string& payload_dir, RunOptions& options) {
  options.http = HttpRunValues{options.work_root + "/api.sock", options.work_root, ""};
  options.payload_source = options.work_root + "/payloads";
  std::error_code ec;
  fs::copy(payload_dir, options.payload_source, fs::copy_options::recursive, ec);
  if (ec) {
    options.server_unavailable = fmt::format("cannot copy the payloads to {}: {}", options.payload_source, ec.message());
    return nullptr;
  }
  auto words = RenderHttpServer(profile, *options.http);
  auto endpoint = RenderHttpEndpoint(profile, *options.http);
  if (!words || !endpoint) {
    options.server_unavailable = (!words ? words.error() : endpoint.error()).ToString();
    return nullptr;
  }
  if (words->empty()) return nullptr;  // a server that is running already
  Launch launch;
  launch.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=" + options.work_root};
  launch.env.insert(launch.env.end(), options.sandbox_env.begin(), options.sandbox_env.end());
  launch.cwd = options.work_root;
  if (options.internet) {
    launch.netns_path = options.internet->uplink_netns_path();
    launch.resolv_conf = options.internet->resolv_conf_path();
  }
  auto server = ProfileServer::Start(*words, *endpoint, launch);
  if (!server) {
    options.server_unavailable = server.error().ToString();
    return nullptr;
  }
  return std::move(*server);
}

std::string StatusFromExit(const Observation& o) {
  if (o.killed_by_net) return "killed_by_safety_net";
  if (o.signal != 0) return "signaled";
  if (o.exit_code == 124) return "timeout";
  if (o.exit_code > 128) return "signaled";
  return "exited";
}

// "boot 3992 ms, setup 4077 ms, run 314 ms, teardown 30 ms" from a result's timings: where a
// run that took too long spent its time. Only whole numbers are shown: the JSON is hostile.
std::string TimingsAccount(const nlohmann::json& result) {
  auto timings = result.find("timings");
  if (timings == result.end() || !timings->is_object()) return "";
  std::vector<std::string> parts;
  for (const char* phase : {"boot", "setup", "run", "teardown"}) {
    int ms = smolbox::IntOr(*timings, fmt::format("{}_ms", phase).c_str(), -1);
    if (ms >= 0) parts.push_back(fmt::format("{} {} ms", phase, ms));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

// The sandbox's own account of the run, where it gives one (smolbox --json); otherwise what
// the exit code says.
void ReadResult(const Profile& profile, const Observation& o, Evidence& e) {
  e.wall_ms = o.wall_ms;
  if (!o.error.empty()) {
    e.setup_error = "launch: " + o.error;
    return;
  }
  if (!profile.smolbox_json || o.killed_by_net) {
    e.status = StatusFromExit(o);
    e.stdout_data = o.stdout_data;
    e.stderr_data = o.stderr_data;
    return;
  }
  // What a sandbox prints is hostile input: a compromised one may print anything.
  auto parsed = smolbox::ParseBoundedJson(o.stdout_data, {.max_bytes = kMaxCaptureBytes}, "sandbox result");
  if (!parsed || !parsed->is_object()) {
    e.status = "internal_error";
    e.stdout_data = o.stdout_data;
    e.stderr_data = o.stderr_data;
    return;
  }
  const nlohmann::json& result = *parsed;
  e.status = smolbox::StringOr(result, "status", "internal_error");
  e.stdout_data = smolbox::StringOr(result, "stdout", "");
  e.stderr_data = smolbox::StringOr(result, "stderr", "") + o.stderr_data;
  if (e.status == "setup_error") e.setup_error = "the sandbox could not start: " + smolbox::StringOr(result, "error", "");
  e.sandbox_timings = TimingsAccount(result);
}

// What changed outside the declared outputs: the canaries and every ro input.
std::vector<std::string> Diff(const std::map<std::string, std::string>& before,
                              const std::map<std::string, std::string>& after, const std::string& label) {
  std::vector<std::string> changes;
  for (const auto& [path, state] : after) {
    auto old = before.find(path);
    if (old == before.end()) changes.push_back(fmt::format("{}/{} appeared", label, path));
    else if (old->second != state && !state.starts_with("dir")) changes.push_back(fmt::format("{}/{} changed", label, path));
  }
  for (const auto& [path, state] : before) {
    if (!after.contains(path)) changes.push_back(fmt::format("{}/{} vanished", label, path));
  }
  return changes;
}

struct Watched {
  std::vector<std::pair<std::string, std::string>> dirs;  // label, host dir
  std::vector<std::map<std::string, std::string>> before;

  void Take() {
    for (const auto& [label, dir] : dirs) before.push_back(Snapshot(dir));
  }
  std::vector<std::string> Changes() const {
    std::vector<std::string> all;
    for (size_t i = 0; i < dirs.size(); ++i) {
      auto changes = Diff(before[i], Snapshot(dirs[i].second), dirs[i].first);
      all.insert(all.end(), changes.begin(), changes.end());
    }
    return all;
  }
};

Placement Place(const Case& c, const CaseDir& dir, const CanarySet& canaries, const std::string& payload_dir,
                const RunOptions& options) {
  Placement p;
  for (const auto& m : c.mounts) p.mount_sources[m.name] = dir.MountDir(m.name);
  p.payload_dir = payload_dir;
  p.payload_source = options.payload_source;
  p.workdir_host = dir.Workdir();
  p.hints = canaries.hints();
  p.marker = RandomMarker();
  if (options.internet) p.test_ca_path = options.internet->ca_path();
  return p;
}

Launch MakeLaunch(const Case& c, const Profile& profile, std::vector<std::string> argv,
                  const CaseDir& dir, const CanarySet& canaries, const RunOptions& options) {
  Launch launch;
  if (c.egress && options.internet) {
    launch.netns_path = options.internet->uplink_netns_path();
    launch.resolv_conf = options.internet->resolv_conf_path();
  }
  launch.argv = std::move(argv);
  launch.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=" + dir.Workdir()};
  for (const auto& e : canaries.env()) launch.env.push_back(e);
  for (const auto& e : options.sandbox_env) launch.env.push_back(e);
  // Host-path sandboxes get the case's env directly; the others through the profile's flags.
  if (profile.host_paths) {
    for (const auto& [k, v] : c.env) launch.env.push_back(k + "=" + v);
  }
  launch.inherited_fds = canaries.inherited_fds();
  launch.stdin_data = c.stdin_data.value_or("");
  launch.cwd = dir.Workdir();
  launch.kill_after_ms = NetBoundMs(WithStartupAllowance(c, profile));
  int64_t cap = std::min<int64_t>(c.Limit("output_bytes") * 4 + (1 << 20), kMaxCaptureBytes);
  launch.capture_bytes = static_cast<size_t>(cap);
  return launch;
}

// What the launch left behind once it has settled: processes carrying the marker, the
// sandbox's own state, and whatever else the net still holds.
std::vector<std::string> Leftovers(const Profile& profile, const std::string& marker,
                                   const CaseDir& dir, const SafetyNet& net) {
  std::vector<std::string> leftovers = FindLeftovers(marker, dir.root());
  auto stale = StaleSandboxState(profile);
  leftovers.insert(leftovers.end(), stale.begin(), stale.end());
  // The net's cgroup also holds daemons that rewrote their command line.
  for (pid_t pid : net.Remaining()) {
    std::string entry = fmt::format("process {} ", pid);
    bool listed = std::any_of(leftovers.begin(), leftovers.end(),
                              [&](const std::string& l) { return l.starts_with(entry); });
    if (!listed) leftovers.push_back(fmt::format("process {} ({})", pid, ProcCmdline(std::to_string(pid)).substr(0, 80)));
  }
  return leftovers;
}

Evidence Observe(const Case& c, const Profile& profile, const std::string& payload_dir, const CaseDir& dir,
                 const RunOptions& options, CaseReport& report) {
  Evidence e;
  auto canaries = CanarySet::Plant({dir.CanaryRoot(), geteuid() == 0, dir.PathTokens()});
  if (!canaries) {
    e.setup_error = "canaries: " + canaries.error().ToString();
    return e;
  }
  if (auto missing = MissingHint(c, (*canaries)->hints())) {
    report.verdict = Verdict::kSkip;
    report.reason = *missing;
    return e;
  }
  Placement placement = Place(c, dir, **canaries, payload_dir, options);
  // An http profile's case is its calls, which http-call makes in the net as a command would run.
  std::optional<std::string> plan;
  if (profile.http) {
    HttpRunValues values = *options.http;
    values.sandbox_name = placement.marker.substr(placement.marker.rfind('-') + 1);
    auto rendered = RenderHttpPlan(profile, c, placement, values);
    if (!rendered) {
      e.setup_error = rendered.error().ToString();
      return e;
    }
    plan = rendered->dump();
  }
  auto argv = profile.http ? Expected<std::vector<std::string>>(std::vector<std::string>{SelfExe(), "http-call"})
                           : RenderCommand(profile, c, placement);
  if (!argv) {
    e.setup_error = argv.error().ToString();
    return e;
  }
  Watched watched;
  watched.dirs.emplace_back("canaries", dir.CanaryRoot());
  for (const auto& m : c.mounts) {
    if (m.read_only) watched.dirs.emplace_back(m.name, dir.MountDir(m.name));
  }
  watched.Take();
  auto net = SafetyNet::Create();
  if (!net) {
    e.setup_error = "safety net: " + net.error().ToString();
    return e;
  }
  Launch launch = MakeLaunch(c, profile, *argv, dir, **canaries, options);
  if (plan) launch.stdin_data = std::move(*plan);
  Observation o = net->Launch(launch);
  ReadResult(profile, o, e);
  std::this_thread::sleep_for(std::chrono::milliseconds(kSettleMs));
  e.leftovers = Leftovers(profile, placement.marker, dir, *net);
  e.stray_writes = watched.Changes();
  for (const auto& m : c.mounts) {
    if (m.read_only) continue;
    auto outputs = ReadOutputs(dir.MountDir(m.name), m.name);
    e.outputs.insert(outputs.begin(), outputs.end());
    auto unsafe = UnsafeOutputs(dir.MountDir(m.name), m.name);
    e.stray_writes.insert(e.stray_writes.end(), unsafe.begin(), unsafe.end());
  }
  auto host_writes = (*canaries)->HostWrites();
  e.stray_writes.insert(e.stray_writes.end(), host_writes.begin(), host_writes.end());
  std::string everything = e.stdout_data + e.stderr_data + o.stdout_data + o.stderr_data;
  for (const auto& [path, content] : e.outputs) everything += path + content;
  e.leaked_canaries = (*canaries)->Leaked(everything);
  e.detections = (*canaries)->Detections();
  return e;
}

}  // namespace

CaseReport RunCase(const Profile& profile, const Case& c, const std::string& payload_dir,
                   const RunOptions& options) {
  CaseReport report{c.id, c.category, c.Kind(), Verdict::kError, "", "", 0, UnsupportedLimits(profile, c), ""};
  if (profile.syntax_only) {
    report.verdict = Verdict::kSkip;
    report.reason = "profile " + profile.name + " is validated for syntax only";
    return report;
  }
  if (!RunsAsCaseUser(profile, c)) {
    report.verdict = Verdict::kSkip;
    report.reason = fmt::format("profile {} has no way to run the workload as {} (its \"user\" field)", profile.name, c.user);
    return report;
  }
  if (auto why = CannotExpressEgress(profile, c)) {
    report.verdict = Verdict::kSkip;
    report.reason = *why;
    return report;
  }
  if (profile.http && !options.http) {
    report.reason = "an http profile's cases run in a battery (smolvm-check run), which sets up its server";
    return report;
  }
  if (profile.http && !options.server_unavailable.empty()) {
    report.reason = "the profile's server: " + options.server_unavailable;
    return report;
  }
  if (c.egress && !options.internet) {
    report.verdict = Verdict::kSkip;
    report.reason = "needs the test internet, which could not be built: " +
                    (options.internet_unavailable.empty() ? "none was given" : options.internet_unavailable);
    return report;
  }
  auto dir = CaseDir::Create(options.work_root, c);
  if (!dir) {
    report.reason = dir.error().ToString();
    return report;
  }
  Evidence evidence = Observe(c, profile, payload_dir, *dir, options, report);
  if (report.verdict == Verdict::kSkip) return report;
  Judgement judgement = Judge(WithStartupAllowance(c, profile), evidence);
  report.verdict = judgement.verdict;
  report.reason = judgement.reason;
  report.status = evidence.status;
  report.wall_ms = evidence.wall_ms;
  if (options.keep_stdout) report.stdout_data = std::move(evidence.stdout_data);
  return report;
}

std::vector<CaseReport> RunBattery(const Profile& profile, const std::vector<Case>& cases,
                                   const std::string& payload_dir, const RunOptions& given,
                                   const std::function<void(const Progress&)>& on_progress) {
  RunOptions options = given;
  std::unique_ptr<TestInternet> internet;
  bool needs_internet = !profile.syntax_only && std::any_of(cases.begin(), cases.end(), [&](const Case& c) {
    return c.egress && !CannotExpressEgress(profile, c);
  });
  if (needs_internet && !options.internet) {
    auto made = TestInternet::Create();
    if (made) {
      internet = std::move(*made);
      options.internet = internet.get();
    } else {
      options.internet_unavailable = made.error().ToString();
    }
  }
  std::unique_ptr<ProfileServer> server;
  if (profile.http && !profile.syntax_only) server = StartHttpProfile(profile, payload_dir, options);
  // A sandbox that boots a kernel and keeps a boot snapshot boots and saves one on the first
  // run of a configuration: with -j N the first N cases would pay for that all at once, on top
  // of cold caches, which no wall-time bound is meant to cover. One untimed run of the first
  // case warms both; every case that follows is judged on the path a user's runs take.
  if (profile.startup_allowance_ms > 0 && !profile.fresh_boot && !profile.syntax_only && !cases.empty()) {
    RunCase(profile, cases.front(), payload_dir, options);
  }
  std::vector<CaseReport> reports(cases.size());
  std::mutex mutex;
  Progress progress{0, cases.size(), 0, 0, ""};
  size_t next = 0;
  auto worker = [&] {
    for (;;) {
      size_t index;
      {
        std::lock_guard lock(mutex);
        if (next == cases.size()) return;
        index = next++;
        progress.current = cases[index].id;
        on_progress(progress);
      }
      CaseReport report = RunCase(profile, cases[index], payload_dir, options);
      std::lock_guard lock(mutex);
      ++progress.done;
      if (report.verdict == Verdict::kPass) ++progress.passed;
      if (report.verdict == Verdict::kFail || report.verdict == Verdict::kError) ++progress.failed;
      reports[index] = std::move(report);
      on_progress(progress);
    }
  };
  std::vector<std::thread> workers;
  for (int i = 0; i < std::max(1, options.jobs); ++i) workers.emplace_back(worker);
  for (auto& w : workers) w.join();
  return reports;
}

}  // namespace smolvm_check
