#include "remote/remote_github.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include "json_bounds.h"
#include "launch/interrupt.h"
#include "launch/subprocess.h"

namespace smolvm_check {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

// Consecutive failing `gh` polls tolerated before giving up: one API hiccup must not lose a run.
constexpr int kMaxPollErrors = 3;
// gh's answers to our polls are 20 runs of six fields, or one run's two: a few KB.
constexpr size_t kMaxPollJsonBytes = 1 << 20;

// Sleeps in short slices so that a signal that lands just before a slice still ends the wait
// promptly.
void SleepUnlessInterrupted(int64_t ms) {
  auto until = Clock::now() + std::chrono::milliseconds(ms);
  while (!Interrupted() && Clock::now() < until) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    std::this_thread::sleep_for(std::min(left, std::chrono::milliseconds(200)));
  }
}

std::string Trim(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t\r\n") - begin + 1);
}

std::string Str(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string Elapsed(Clock::time_point since) {
  auto s = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - since).count();
  return fmt::format("{}m{:02}s", s / 60, s % 60);
}

// Unique enough for concurrent runs from many hosts: the time, then random bits.
std::string RunTag() {
  std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::gmtime(&now));
  return fmt::format("{}-{:04x}", stamp, std::random_device{}() & 0xffff);
}

// What GitHub lists a workflow's runs under: its top-level `name:`, else its path.
std::string WorkflowName(const std::string& yaml, const std::string& path) {
  static const std::regex kName(R"(^name:[ \t]*(["']?)(.*?)\1[ \t]*$)");
  std::istringstream lines(yaml);
  std::smatch m;
  for (std::string line; std::getline(lines, line);) {
    if (std::regex_match(line, m, kName) && !m[2].str().empty()) return m[2].str();
  }
  return path;
}

struct RunInfo {
  int64_t id = 0;
  std::string status;
  std::string conclusion;
  std::string url;
};

// One remote battery: its destructor is the scope guard that cancels an unfinished run and
// deletes the temporary branch, whichever way Execute() ends.
class RemoteRun {
 public:
  explicit RemoteRun(const RemoteGithubOptions& options) : o_(options) {
    url_ =
        o_.remote_url.empty() ? fmt::format("https://github.com/{}.git", o_.repo) : o_.remote_url;
  }
  ~RemoteRun() { Cleanup(); }
  RemoteRun(const RemoteRun&) = delete;
  RemoteRun& operator=(const RemoteRun&) = delete;

  int Execute();

 private:
  Expected<void> CheckGh();
  Expected<std::string> CommitToPush();
  Expected<void> Push(const std::string& sha);
  Expected<RunInfo> FindRun(const std::string& sha);
  Expected<RunInfo> WaitForCompletion(RunInfo run);
  Expected<void> Download(const RunInfo& run);
  void ShowProgress(const RunInfo& run);
  void PrintSummary(const RunInfo& run);
  void Cleanup();
  int Fail(const Error& error);

  Expected<std::string> Gh(std::vector<std::string> args, const CaptureOptions& options = {});
  Expected<std::string> Git(std::vector<std::string> args, std::vector<std::string> env = {});
  Expected<std::vector<json>> PollJson(std::vector<std::string> args, int& errors);
  Error InterruptedError() const;

  const RemoteGithubOptions& o_;
  std::string url_;
  std::string branch_;
  std::string out_dir_;
  std::string workflow_name_;  // the `name:` runs of the pushed workflow are listed under
  bool pushed_ = false;
  std::optional<int64_t> run_id_;
  bool completed_ = false;
  std::string progress_status_;  // the status line shows this
  Clock::time_point start_ = Clock::now();
};

int RemoteRun::Execute() {
  if (auto ok = CheckGh(); !ok) return Fail(ok.error());
  auto sha = CommitToPush();
  if (!sha) return Fail(sha.error());
  if (auto ok = Push(*sha); !ok) return Fail(ok.error());
  auto found = FindRun(*sha);
  if (!found) return Fail(found.error());
  auto run = WaitForCompletion(*found);
  if (!run) return Fail(run.error());
  bool passed = run->conclusion == "success";
  auto fetched = Download(*run);
  PrintSummary(*run);
  if (!fetched) {
    fmt::print(stderr, "smolvm-check: remote github: {}\n", fetched.error().ToString());
    // A failed run may have died before it wrote reports; a passing one must bring them back.
    if (passed) return kRemoteNoVerdict;
  }
  return passed ? kRemotePassed : kRemoteFailed;
}

int RemoteRun::Fail(const Error& error) {
  // A terminal's status line is left open for the next rewrite: end it first.
  if (isatty(STDERR_FILENO) && !progress_status_.empty() && progress_status_ != "completed") {
    fmt::print(stderr, "\n");
  }
  fmt::print(stderr, "smolvm-check: remote github: {}\n", error.ToString());
  return Interrupted() ? kRemoteInterruptedBase + InterruptSignal() : kRemoteNoVerdict;
}

Error RemoteRun::InterruptedError() const {
  return Error{"interrupted", InterruptSignal() == SIGTERM ? "SIGTERM" : "SIGINT", 0};
}

Expected<std::string> RemoteRun::Gh(std::vector<std::string> args, const CaptureOptions& options) {
  args.insert(args.begin(), "gh");
  CaptureOptions with_env = options;
  with_env.extra_env.push_back("GH_PROMPT_DISABLED=1");
  SMOLBOX_ASSIGN_OR_RETURN(auto r, RunCaptured(args, with_env));
  if (r.exit_code != 0) {
    std::string said = Trim(r.err.empty() ? r.out : r.err);
    return std::unexpected(Error{fmt::format("gh {} {}", args[1], args[2]),
                                 fmt::format("exit {}: {}", r.exit_code, FirstLine(said)), 0});
  }
  return r.out;
}

Expected<std::string> RemoteRun::Git(std::vector<std::string> args, std::vector<std::string> env) {
  args.insert(args.begin(), "git");
  // A push that needs credentials fails with git's message instead of waiting for a password.
  env.push_back("GIT_TERMINAL_PROMPT=0");
  CaptureOptions options;
  options.extra_env = std::move(env);
  SMOLBOX_ASSIGN_OR_RETURN(auto r, RunCaptured(args, options));
  if (r.exit_code != 0) {
    return std::unexpected(
        Error{fmt::format("git {}", args[1]), FirstLine(Trim(r.err + r.out)), 0});
  }
  return Trim(r.out);
}

Expected<void> RemoteRun::CheckGh() {
  static const std::regex kRepo("[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+");
  if (!std::regex_match(o_.repo, kRepo)) {
    return std::unexpected(
        Error::Field("--repo", fmt::format("expected OWNER/NAME, got {:?}", o_.repo)));
  }
  auto r = RunCaptured({"gh", "auth", "status"});
  if (!r && r.error().errnum == ENOENT) {
    return std::unexpected(Error{"gh",
                                 "the GitHub CLI is not on PATH: install gh "
                                 "(https://cli.github.com), then run `gh auth login`",
                                 0});
  }
  SMOLBOX_TRY(r);
  if (r->exit_code != 0) {
    std::string said = FirstLine(Trim(r->err.empty() ? r->out : r->err));
    return std::unexpected(Error{
        "gh auth status",
        fmt::format("gh is not logged in to GitHub: run `gh auth login` (gh said: {})", said), 0});
  }
  return {};
}

// --ref as given, or HEAD with the working tree's changes to tracked files: `git stash create`
// makes that commit without touching the tree, the index or the stash list.
Expected<std::string> RemoteRun::CommitToPush() {
  std::string sha;
  if (!o_.ref.empty()) {
    auto r = Git({"rev-parse", "--verify", "--quiet", o_.ref + "^{commit}"});
    if (!r) {
      return std::unexpected(
          Error::Field("--ref", fmt::format("{:?} is not a commit here", o_.ref)));
    }
    sha = *r;
  } else {
    // A throwaway commit: who made it does not matter, and the user may have no identity set.
    auto stash =
        Git({"stash", "create", "smolvm-check remote github"},
            {"GIT_AUTHOR_NAME=smolvm-check", "GIT_AUTHOR_EMAIL=smolvm-check@localhost",
             "GIT_COMMITTER_NAME=smolvm-check", "GIT_COMMITTER_EMAIL=smolvm-check@localhost"});
    SMOLBOX_TRY(stash);
    if (!stash->empty()) {
      fmt::print(stderr,
                 "smolvm-check: pushing HEAD with the uncommitted changes to tracked files\n");
      sha = *stash;
    } else {
      SMOLBOX_ASSIGN_OR_RETURN(auto head, Git({"rev-parse", "--verify", "HEAD^{commit}"}));
      sha = head;
    }
  }
  // Without the workflow in the pushed tree, the push starts nothing and the wait is for naught.
  std::string workflow_path = ".github/workflows/" + o_.workflow;
  auto workflow = RunCaptured({"git", "show", sha + ":" + workflow_path});
  if (!workflow || workflow->exit_code != 0) {
    return std::unexpected(Error{workflow_path,
                                 fmt::format("not in the commit to push ({}): copy "
                                             "it from smolvm-check's repository",
                                             sha.substr(0, 12)),
                                 0});
  }
  workflow_name_ = WorkflowName(workflow->out, workflow_path);
  return sha;
}

Expected<void> RemoteRun::Push(const std::string& sha) {
  branch_ = "smolvm-check/run-" + RunTag();
  start_ = Clock::now();
  auto pushed = Git({"push", "--quiet", url_, sha + ":refs/heads/" + branch_});
  // A push that a signal cut short may still have landed: clean up as if it had.
  pushed_ = pushed.has_value() || Interrupted();
  if (!pushed) {
    Error e = pushed.error();
    e.what += " (for an https remote, `gh auth setup-git` lets git use gh's login)";
    return std::unexpected(e);
  }
  fmt::print(stderr, "smolvm-check: pushed {} to {} on {}\n", sha.substr(0, 12), branch_, o_.repo);
  return {};
}

// The JSON a `gh ... --json` poll printed, as a list; an error once kMaxPollErrors polls in a
// row have failed.
Expected<std::vector<json>> RemoteRun::PollJson(std::vector<std::string> args, int& errors) {
  auto text = Gh(std::move(args));
  // Ctrl-C reaches gh too (same process group): its failure then is no API hiccup.
  if (Interrupted()) return std::unexpected(InterruptedError());
  Expected<json> value = text ? smolbox::ParseBoundedJson(*text, {.max_bytes = kMaxPollJsonBytes}, "gh")
                              : std::unexpected(text.error());
  if (value && (value->is_array() || value->is_object())) {
    errors = 0;
    if (value->is_object()) return std::vector<json>{*value};
    return std::vector<json>(value->begin(), value->end());
  }
  Error e =
      text ? Error{"gh", fmt::format("printed no JSON: {:?}", FirstLine(*text)), 0} : text.error();
  if (++errors >= kMaxPollErrors) return std::unexpected(e);
  fmt::print(stderr, "smolvm-check: {} (retrying)\n", e.ToString());
  return std::vector<json>{};
}

Expected<RunInfo> RemoteRun::FindRun(const std::string& sha) {
  auto until = std::min(start_ + std::chrono::milliseconds(o_.start_wait_ms),
                        start_ + std::chrono::milliseconds(o_.timeout_ms));
  int errors = 0;
  while (!Interrupted()) {
    // Not `--workflow FILE`: gh resolves that through the default branch, which may not have
    // the workflow (a 404 until GitHub registers it); the run's workflow name is as exact.
    auto runs = PollJson({"run", "list", "--repo", o_.repo, "--branch", branch_, "--json",
                          "databaseId,status,conclusion,headSha,url,workflowName", "--limit", "20"},
                         errors);
    SMOLBOX_TRY(runs);
    for (const json& r : *runs) {
      if (Str(r, "headSha") != sha || Str(r, "workflowName") != workflow_name_) continue;
      if (!r.contains("databaseId") || !r["databaseId"].is_number_integer()) continue;
      RunInfo run{r["databaseId"].get<int64_t>(), Str(r, "status"), Str(r, "conclusion"),
                  Str(r, "url")};
      run_id_ = run.id;
      fmt::print(stderr, "smolvm-check: run {}: {}\n", run.id, run.url);
      return run;
    }
    if (Clock::now() >= until) {
      return std::unexpected(Error{
          "waiting for the workflow run",
          fmt::format(
              "no {} run for {} after {}: are Actions enabled on {}, and does the workflow run on "
              "push to smolvm-check/**?",
              o_.workflow, branch_, Elapsed(start_), o_.repo),
          0});
    }
    SleepUnlessInterrupted(o_.poll_ms);
  }
  return std::unexpected(InterruptedError());
}

// One status line: rewritten in place on a terminal, a line per change of status otherwise.
void RemoteRun::ShowProgress(const RunInfo& run) {
  std::string state = run.conclusion.empty() ? run.status : run.status + ": " + run.conclusion;
  std::string line = fmt::format("smolvm-check: run {} {} ({})", run.id, state, Elapsed(start_));
  if (isatty(STDERR_FILENO)) {
    fmt::print(stderr, "\r\033[K{}{}", line, run.status == "completed" ? "\n" : "");
  } else if (run.status != progress_status_) {
    fmt::print(stderr, "{}\n", line);
  }
  progress_status_ = run.status;
}

Expected<RunInfo> RemoteRun::WaitForCompletion(RunInfo run) {
  auto deadline = start_ + std::chrono::milliseconds(o_.timeout_ms);
  int errors = 0;
  while (run.status != "completed") {
    if (Clock::now() >= deadline) {
      return std::unexpected(
          Error{fmt::format("run {}", run.id),
                fmt::format("not completed after {} (--timeout)", Elapsed(start_)), 0});
    }
    SleepUnlessInterrupted(o_.poll_ms);
    if (Interrupted()) return std::unexpected(InterruptedError());
    auto views = PollJson(
        {"run", "view", std::to_string(run.id), "--repo", o_.repo, "--json", "status,conclusion"},
        errors);
    SMOLBOX_TRY(views);
    if (views->empty()) continue;
    run.status = Str(views->front(), "status");
    run.conclusion = Str(views->front(), "conclusion");
    ShowProgress(run);
  }
  completed_ = true;
  return run;
}

Expected<void> RemoteRun::Download(const RunInfo& run) {
  std::string id = std::to_string(run.id);
  out_dir_ = o_.out_dir.empty() ? "remote-results/" + id : o_.out_dir;
  std::error_code ec;
  fs::create_directories(out_dir_, ec);
  if (ec) return std::unexpected(Error{"--out " + out_dir_, ec.message(), 0});
  auto artifacts = Gh({"run", "download", id, "--repo", o_.repo, "--dir", out_dir_});
  // The log also when there are no artifacts: it is what explains a run that left no reports.
  CaptureOptions to_log;
  to_log.stdout_path = out_dir_ + "/run.log";
  if (auto log = Gh({"run", "view", id, "--repo", o_.repo, "--log"}, to_log); !log) {
    fmt::print(stderr, "smolvm-check: the run's log: {}\n", log.error().ToString());
  }
  SMOLBOX_TRY(artifacts);
  return {};
}

// The Markdown reports the run uploaded, in path order, then where everything is.
void RemoteRun::PrintSummary(const RunInfo& run) {
  std::vector<fs::path> reports;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(out_dir_, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->path().filename() == "report.md") reports.push_back(it->path());
  }
  std::sort(reports.begin(), reports.end());
  for (const fs::path& report : reports) {
    std::ifstream in(report);
    std::stringstream text;
    text << in.rdbuf();
    fmt::print("--- {} ---\n{}\n", fs::relative(report, out_dir_, ec).string(), text.str());
  }
  if (reports.empty()) {
    fmt::print("No report.md in the run's artifacts: see {}/run.log\n", out_dir_);
  }
  fmt::print("Remote run {} ({}): {}. Reports and run.log: {}/\n", run.id, run.url,
             run.conclusion.empty() ? "no conclusion" : run.conclusion, out_dir_);
  std::fflush(stdout);
}

void RemoteRun::Cleanup() {
  if (o_.keep_branch) {
    if (pushed_) fmt::print(stderr, "smolvm-check: kept branch {} on {}\n", branch_, o_.repo);
    return;
  }
  // An interrupted or timed-out wait leaves a run going that nobody will read.
  if (run_id_ && !completed_) {
    if (auto ok = Gh({"run", "cancel", std::to_string(*run_id_), "--repo", o_.repo}); !ok) {
      fmt::print(stderr, "smolvm-check: could not cancel run {}: {}\n", *run_id_,
                 ok.error().ToString());
    } else {
      fmt::print(stderr, "smolvm-check: cancelled run {}\n", *run_id_);
    }
  }
  if (!pushed_) return;
  if (auto ok = Git({"push", "--quiet", url_, "--delete", "refs/heads/" + branch_}); !ok) {
    fmt::print(
        stderr,
        "smolvm-check: could not delete branch {}: {}; delete it with: git push {} --delete {}\n",
        branch_, ok.error().ToString(), url_, branch_);
    return;
  }
  fmt::print(stderr, "smolvm-check: deleted branch {}\n", branch_);
}

}  // namespace

RemoteGithubOptions RemoteGithubOptionsFromEnvironment() {
  RemoteGithubOptions options;
  if (const char* url = getenv("SMOLVM_CHECK_REMOTE_URL"); url && *url) options.remote_url = url;
  if (const char* ms = getenv("SMOLVM_CHECK_POLL_MS"); ms && *ms) {
    options.poll_ms = std::max<int64_t>(1, std::strtoll(ms, nullptr, 10));
  }
  return options;
}

int RunRemoteGithub(const RemoteGithubOptions& options) {
  InterruptScope interrupts;
  int exit_code = kRemoteNoVerdict;
  {
    RemoteRun run(options);
    exit_code = run.Execute();
  }  // the branch is gone here, before the exit code is reported
  if (Interrupted()) exit_code = kRemoteInterruptedBase + InterruptSignal();
  return exit_code;
}

}  // namespace smolvm_check
