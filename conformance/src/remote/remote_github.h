// `smolvm-check remote github`: the battery on a GitHub Actions runner that has /dev/kvm, for
// hosts that have none. It pushes the tree to a temporary branch, which starts
// .github/workflows/smolvm-check.yml, waits for that run, downloads its reports and log, prints
// the summary and deletes the branch, also on failure and on Ctrl-C.
//
//   RemoteGithubOptions options = RemoteGithubOptionsFromEnvironment();
//   options.repo = "OWNER/NAME";
//   int exit_code = RunRemoteGithub(options);   // kRemotePassed, kRemoteFailed, ...
//
// It drives `gh` (authenticated) and `git` found on PATH; the tests put stand-ins there.
#pragma once

#include <cstdint>
#include <string>

namespace smolvm_check {

// The remote battery passed: the run concluded `success`.
constexpr int kRemotePassed = 0;
// The run completed with any other conclusion: the battery, or the job around it, failed.
constexpr int kRemoteFailed = 1;
// No verdict: bad usage, no authenticated gh, the push failed, no run started, the wait timed
// out, or a passing run's reports could not be downloaded.
constexpr int kRemoteNoVerdict = 2;
// Interrupted by SIGINT or SIGTERM: 128 + the signal, as a shell reports it (130 for Ctrl-C).
constexpr int kRemoteInterruptedBase = 128;

struct RemoteGithubOptions {
  std::string repo;     // OWNER/NAME
  std::string ref;      // a commit-ish; empty: HEAD plus uncommitted changes to tracked files
  std::string out_dir;  // empty: remote-results/<run-id>
  bool keep_branch = false;
  int64_t timeout_ms = 60 * 60 * 1000;    // from the push to the run's completion
  int64_t start_wait_ms = 5 * 60 * 1000;  // for the run the push starts to show up
  int64_t poll_ms = 10 * 1000;
  // Where to push; empty: https://github.com/OWNER/NAME.git.
  std::string remote_url;
  std::string workflow = "smolvm-check.yml";
};

// Defaults, overridden by SMOLVM_CHECK_REMOTE_URL (the push target: the tests use a local bare
// repository) and SMOLVM_CHECK_POLL_MS (the tests poll fast).
RemoteGithubOptions RemoteGithubOptionsFromEnvironment();

// Does it all, printing progress to stderr and the summary to stdout; returns an exit code.
// SIGINT and SIGTERM are caught while it runs so that the branch is still deleted.
int RunRemoteGithub(const RemoteGithubOptions& options);

}  // namespace smolvm_check
