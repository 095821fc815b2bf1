#include "remote/remote_command.h"

#include <fmt/format.h>

#include <memory>
#include <string>

#include "remote/remote_github.h"
#include "smolbox/units.h"

namespace smolvm_check {

void AddRemoteCommand(CLI::App& app, int& exit_code) {
  CLI::App* remote =
      app.add_subcommand("remote", "Run the battery on another machine and bring the reports back");
  remote->require_subcommand(1);
  CLI::App* github = remote->add_subcommand(
      "github",
      "On a GitHub Actions runner with /dev/kvm: push to a temporary branch smolvm-check/run-*, "
      "wait for .github/workflows/smolvm-check.yml, download its reports, delete the branch. "
      "Needs an authenticated gh. Exit 0: passed; 1: failed; 2: no verdict; 130: interrupted");
  // The callback outlives this function: the options live as long as the App holds it.
  auto options = std::make_shared<RemoteGithubOptions>(RemoteGithubOptionsFromEnvironment());
  auto timeout = std::make_shared<std::string>("60m");
  github->add_option("--repo", options->repo, "The GitHub repository, OWNER/NAME")->required();
  github->add_option("--ref", options->ref,
                     "Commit to push (default: HEAD with uncommitted changes to tracked files)");
  github->add_option("--out", options->out_dir,
                     "Where the reports and run.log land (default: remote-results/<run-id>)");
  github->add_flag("--keep-branch", options->keep_branch,
                   "Keep the temporary branch (and an unfinished run) afterwards");
  github->add_option("--timeout", *timeout, "Longest wait for the run (ms, s, m)")
      ->capture_default_str();
  github->callback([options, timeout, &exit_code] {
    auto ms = smolbox::ParseDuration(*timeout);
    if (!ms || *ms <= 0) {
      fmt::print(stderr, "smolvm-check: --timeout {:?}: expected a duration like 90m\n", *timeout);
      exit_code = kRemoteNoVerdict;
      return;
    }
    options->timeout_ms = *ms;
    exit_code = RunRemoteGithub(*options);
  });
}

}  // namespace smolvm_check
