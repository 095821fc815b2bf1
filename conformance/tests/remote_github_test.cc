// `smolvm-check remote github`, end to end, with GitHub played by a local bare repository (the
// push target) and a scripted `gh` first on PATH that records its calls and serves a canned run
// and artifact. Each run is a forked child that parses the command line as main does, so that
// the test can interrupt it like a user pressing Ctrl-C.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "launch/subprocess.h"
#include "remote/remote_command.h"
#include "test_support.h"

namespace smolvm_check {
namespace {

namespace fs = std::filesystem;
using smolbox::testing::ReadFileOrEmpty;
using smolbox::testing::TempDir;
using smolbox::testing::WriteFile;

// The stand-in for gh. State lives in FAKE_GH_STATE; the run is for the commit the bare repo
// FAKE_GH_REMOTE holds on the branch asked for. FAKE_GH_CONCLUSION=never keeps it running,
// FAKE_GH_LIST=never keeps it from ever showing up, FAKE_GH_AUTH_RC fails `auth status`.
constexpr const char* kFakeGh = R"SH(#!/usr/bin/env bash
set -euo pipefail
state=$FAKE_GH_STATE
printf '%s\n' "$*" >>"$state/calls"
value_of() { local want=$1; shift; while (($#)); do [ "$1" = "$want" ] && { echo "$2"; return; }; shift; done; }
count() { local n; n=$(( $(cat "$state/$1" 2>/dev/null || echo 0) + 1 )); echo "$n" >"$state/$1"; echo "$n"; }
case "$1 $2" in
  "auth status")
    if [ "${FAKE_GH_AUTH_RC:-0}" != 0 ]; then
      echo "You are not logged into any GitHub hosts. To log in, run: gh auth login" >&2
      exit "$FAKE_GH_AUTH_RC"
    fi
    echo "github.com: Logged in to github.com account tester" >&2 ;;
  "run list")
    if [ "$(count list)" -lt 2 ] || [ "${FAKE_GH_LIST:-}" = never ]; then echo '[]'; exit 0; fi
    branch=$(value_of --branch "$@")
    sha=$(git --git-dir="$FAKE_GH_REMOTE" rev-parse "refs/heads/$branch")
    # The same push also started another workflow: only smolvm-check's run counts.
    printf '[{"conclusion":"","databaseId":999,"headSha":"%s","status":"queued","url":"https://github.com/o/n/actions/runs/999","workflowName":"ci"},' "$sha"
    printf '{"conclusion":"","databaseId":4242,"headSha":"%s","status":"queued","url":"https://github.com/o/n/actions/runs/4242","workflowName":"smolvm-check"}]\n' "$sha" ;;
  "run view")
    if [[ " $* " == *" --log "* ]]; then printf 'battery\tBattery on every usable backend\t145 passed\n'; exit 0; fi
    if [ "$(count view)" -lt 2 ] || [ "${FAKE_GH_CONCLUSION:-success}" = never ]; then
      echo '{"conclusion":"","status":"in_progress"}'
    else
      printf '{"conclusion":"%s","status":"completed"}\n' "${FAKE_GH_CONCLUSION:-success}"
    fi ;;
  "run download")
    dir=$(value_of --dir "$@")/smolvm-check-reports
    mkdir -p "$dir/smolbox-ns"
    printf '# smolvm-check: smolbox:ns\n\n| category | pass | fail |\n|---|---|---|\n| cpu | 9 | 0 |\n' >"$dir/smolbox-ns/report.md"
    echo '{"backends": []}' >"$dir/host.json" ;;
  "run cancel") echo "Request to cancel workflow 4242 submitted." ;;
  *) echo "fake gh: unexpected call: $*" >&2; exit 64 ;;
esac
)SH";

struct Outcome {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string MustRun(const std::vector<std::string>& argv) {
  auto r = RunCaptured(argv);
  EXPECT_TRUE(r.has_value()) << argv[0];
  if (!r) return "";
  EXPECT_EQ(r->exit_code, 0) << argv[1] << " " << r->err;
  return r->out;
}

class RemoteGithub : public ::testing::Test {
 protected:
  void SetUp() override {
    remote_ = root_ + "/remote.git";
    work_ = root_ + "/work";
    MustRun({"git", "init", "--quiet", "--bare", remote_});
    MustRun({"git", "init", "--quiet", work_});
    WriteFile(work_ + "/README", "a project\n");
    WriteFile(work_ + "/.github/workflows/smolvm-check.yml",
              "# the KVM runner\nname: smolvm-check\n");
    Commit("first");
    WriteFile(root_ + "/bin/gh", kFakeGh);
    chmod((root_ + "/bin/gh").c_str(), 0755);
    fs::create_directories(root_ + "/state");
    env_ = {{"PATH", root_ + "/bin:" + getenv("PATH")},
            {"SMOLVM_CHECK_REMOTE_URL", remote_},
            {"SMOLVM_CHECK_POLL_MS", "20"},
            {"FAKE_GH_STATE", root_ + "/state"},
            {"FAKE_GH_REMOTE", remote_}};
  }

  void Commit(const std::string& message) {
    MustRun({"git", "-C", work_, "add", "-A"});
    MustRun({"git", "-C", work_, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet",
             "-m", message});
  }

  // Starts `smolvm-check remote github ARGS` in a child, in the work tree, with env_.
  pid_t Start(std::vector<std::string> args) {
    args.insert(args.begin(), {"smolvm-check", "remote", "github"});
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid != 0) return pid;
    if (!freopen((root_ + "/stdout").c_str(), "w", stdout) ||
        !freopen((root_ + "/stderr").c_str(), "w", stderr) || chdir(work_.c_str()) != 0) {
      _exit(98);
    }
    for (const auto& [key, value] : env_) setenv(key.c_str(), value.c_str(), 1);
    CLI::App app{"smolvm-check"};
    int exit_code = 2;
    AddRemoteCommand(app, exit_code);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    try {
      app.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::ParseError& e) {
      std::fprintf(stderr, "smolvm-check: %s\n", e.what());
    }
    std::fflush(nullptr);
    _exit(exit_code);
  }

  Outcome Finish(pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    Outcome o;
    o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    o.out = ReadFileOrEmpty(root_ + "/stdout");
    o.err = ReadFileOrEmpty(root_ + "/stderr");
    return o;
  }

  Outcome Run(std::vector<std::string> args) { return Finish(Start(std::move(args))); }

  // The calls gh received, the random branch name replaced by BRANCH.
  std::vector<std::string> Calls() {
    std::vector<std::string> calls;
    std::istringstream lines(ReadFileOrEmpty(root_ + "/state/calls"));
    static const std::regex kBranch("smolvm-check/run-[0-9a-f-]+");
    for (std::string line; std::getline(lines, line);) {
      calls.push_back(std::regex_replace(line, kBranch, "BRANCH"));
    }
    return calls;
  }

  std::vector<std::string> RemoteBranches() {
    std::istringstream lines(MustRun(
        {"git", "--git-dir", remote_, "for-each-ref", "--format=%(refname)", "refs/heads"}));
    std::vector<std::string> branches;
    for (std::string line; std::getline(lines, line);) branches.push_back(line);
    return branches;
  }

  // Waits until gh has been called with this prefix, so that a signal lands mid-poll.
  bool WaitForCall(const std::string& prefix) {
    for (int i = 0; i < 500; ++i) {
      for (const std::string& call : Calls()) {
        if (call.starts_with(prefix)) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  TempDir scratch_{"smolvm-check-remote"};
  std::string root_ = scratch_.path();
  std::string remote_, work_;
  std::map<std::string, std::string> env_;
};

const std::string kList =
    "run list --repo o/n --branch BRANCH --json "
    "databaseId,status,conclusion,headSha,url,workflowName --limit 20";
const std::string kView = "run view 4242 --repo o/n --json status,conclusion";
const std::string kCancel = "run cancel 4242 --repo o/n";

TEST_F(RemoteGithub, a_passing_run_downloads_its_reports_prints_them_and_deletes_the_branch) {
  std::string out = root_ + "/results";
  Outcome o = Run({"--repo", "o/n", "--out", out});
  EXPECT_EQ(o.exit_code, 0) << o.err;
  std::vector<std::string> expected = {"auth status",
                                       kList,
                                       kList,
                                       kView,
                                       kView,
                                       "run download 4242 --repo o/n --dir " + out,
                                       "run view 4242 --repo o/n --log"};
  EXPECT_EQ(Calls(), expected);
  EXPECT_TRUE(fs::exists(out + "/smolvm-check-reports/smolbox-ns/report.md"));
  EXPECT_TRUE(fs::exists(out + "/smolvm-check-reports/host.json"));
  EXPECT_NE(ReadFileOrEmpty(out + "/run.log").find("145 passed"), std::string::npos);
  EXPECT_NE(o.out.find("| cpu | 9 | 0 |"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("success"), std::string::npos) << o.out;
  EXPECT_TRUE(RemoteBranches().empty());
  EXPECT_NE(o.err.find("deleted branch smolvm-check/run-"), std::string::npos) << o.err;
}

TEST_F(RemoteGithub, a_failing_run_exits_1_with_its_reports_and_still_deletes_the_branch) {
  env_["FAKE_GH_CONCLUSION"] = "failure";
  std::string out = root_ + "/results";
  Outcome o = Run({"--repo", "o/n", "--out", out});
  EXPECT_EQ(o.exit_code, 1) << o.err;
  EXPECT_EQ(Calls().back(), "run view 4242 --repo o/n --log");
  EXPECT_TRUE(fs::exists(out + "/smolvm-check-reports/smolbox-ns/report.md"));
  EXPECT_NE(o.out.find("failure"), std::string::npos) << o.out;
  EXPECT_TRUE(RemoteBranches().empty());
}

TEST_F(RemoteGithub, keep_branch_keeps_it_and_the_results_default_to_remote_results_run_id) {
  Outcome o = Run({"--repo", "o/n", "--keep-branch"});
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(Calls()[5], "run download 4242 --repo o/n --dir remote-results/4242");
  EXPECT_TRUE(fs::exists(work_ + "/remote-results/4242/smolvm-check-reports/smolbox-ns/report.md"));
  ASSERT_EQ(RemoteBranches().size(), 1u);
  EXPECT_TRUE(RemoteBranches()[0].starts_with("refs/heads/smolvm-check/run-"));
  EXPECT_NE(o.err.find("kept branch"), std::string::npos) << o.err;
}

TEST_F(RemoteGithub, uncommitted_changes_to_tracked_files_are_pushed_without_touching_the_tree) {
  WriteFile(work_ + "/README", "edited, not committed\n");
  Outcome o = Run({"--repo", "o/n", "--keep-branch", "--out", root_ + "/results"});
  EXPECT_EQ(o.exit_code, 0) << o.err;
  ASSERT_EQ(RemoteBranches().size(), 1u);
  EXPECT_EQ(MustRun({"git", "--git-dir", remote_, "show", RemoteBranches()[0] + ":README"}),
            "edited, not committed\n");
  EXPECT_EQ(ReadFileOrEmpty(work_ + "/README"), "edited, not committed\n");
  EXPECT_EQ(MustRun({"git", "-C", work_, "stash", "list"}), "");
}

TEST_F(RemoteGithub, the_run_is_found_by_the_pushed_workflows_name_quoted_or_not) {
  WriteFile(work_ + "/.github/workflows/smolvm-check.yml",
            "on: push\nname: 'smolvm-check'\njobs:\n  x:\n    name: not this one\n");
  Commit("quoted name");
  Outcome o = Run({"--repo", "o/n", "--out", root_ + "/results"});
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.err.find("run 4242"), std::string::npos) << o.err;
}

TEST_F(RemoteGithub, ctrl_c_while_the_run_is_in_progress_cancels_it_deletes_the_branch_exits_130) {
  env_["FAKE_GH_CONCLUSION"] = "never";
  pid_t pid = Start({"--repo", "o/n", "--out", root_ + "/results"});
  ASSERT_TRUE(WaitForCall("run view"));
  kill(pid, SIGINT);
  Outcome o = Finish(pid);
  EXPECT_EQ(o.exit_code, 130) << o.err;
  EXPECT_EQ(Calls().back(), kCancel);
  EXPECT_TRUE(RemoteBranches().empty());
  EXPECT_NE(o.err.find("interrupted"), std::string::npos) << o.err;
}

TEST_F(RemoteGithub, sigterm_before_the_run_shows_up_deletes_the_branch_and_exits_143) {
  env_["FAKE_GH_LIST"] = "never";
  pid_t pid = Start({"--repo", "o/n"});
  ASSERT_TRUE(WaitForCall("run list"));
  kill(pid, SIGTERM);
  Outcome o = Finish(pid);
  EXPECT_EQ(o.exit_code, 143) << o.err;
  for (const std::string& call : Calls()) EXPECT_NE(call, kCancel) << "no run to cancel yet";
  EXPECT_TRUE(RemoteBranches().empty());
}

TEST_F(RemoteGithub, a_run_that_outlasts_the_timeout_is_cancelled_and_has_no_verdict) {
  env_["FAKE_GH_CONCLUSION"] = "never";
  Outcome o = Run({"--repo", "o/n", "--timeout", "400ms"});
  EXPECT_EQ(o.exit_code, 2) << o.err;
  EXPECT_NE(o.err.find("--timeout"), std::string::npos) << o.err;
  EXPECT_EQ(Calls().back(), kCancel);
  EXPECT_TRUE(RemoteBranches().empty());
}

TEST_F(RemoteGithub, no_gh_on_path_is_refused_with_what_to_install) {
  fs::create_directories(root_ + "/empty");
  env_["PATH"] = root_ + "/empty";
  Outcome o = Run({"--repo", "o/n"});
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.err.find("not on PATH"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("gh auth login"), std::string::npos) << o.err;
  EXPECT_TRUE(RemoteBranches().empty());
}

TEST_F(RemoteGithub, an_unauthenticated_gh_is_refused_before_anything_is_pushed) {
  env_["FAKE_GH_AUTH_RC"] = "1";
  Outcome o = Run({"--repo", "o/n"});
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.err.find("run `gh auth login`"), std::string::npos) << o.err;
  EXPECT_EQ(Calls(), std::vector<std::string>{"auth status"});
  EXPECT_TRUE(RemoteBranches().empty());
}

TEST_F(RemoteGithub, a_tree_without_the_workflow_is_refused_before_the_push) {
  fs::remove_all(work_ + "/.github");
  Commit("no workflow");
  Outcome o = Run({"--repo", "o/n"});
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.err.find(".github/workflows/smolvm-check.yml"), std::string::npos) << o.err;
  EXPECT_TRUE(RemoteBranches().empty());
}

TEST_F(RemoteGithub, bad_usage_exits_2_naming_the_flag) {
  EXPECT_EQ(Run({"--repo", "not-a-repo"}).exit_code, 2);
  EXPECT_NE(ReadFileOrEmpty(root_ + "/stderr").find("--repo"), std::string::npos);
  Outcome bad_ref = Run({"--repo", "o/n", "--ref", "no-such-ref"});
  EXPECT_EQ(bad_ref.exit_code, 2);
  EXPECT_NE(bad_ref.err.find("no-such-ref"), std::string::npos) << bad_ref.err;
  EXPECT_EQ(Run({}).exit_code, 2) << "--repo is required";
  EXPECT_TRUE(RemoteBranches().empty());
}

}  // namespace
}  // namespace smolvm_check
