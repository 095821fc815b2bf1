// Runs cases against one sandbox: places each case on the host (its mounts, workdir, payloads
// and canaries), renders the profile's command, launches it in the safety net, collects the
// evidence and judges it. Cases run in parallel with -j.
//
// An egress case runs on the test internet: nothing it reaches, sandboxed or not, is off this
// machine.
//
// Args placeholders a case may use: {mount:NAME} (the mount's path as the sandbox sees it),
// {workdir}, and the canary hints of canaries.h. The runner appends a unique marker as the
// last argv word of every payload, which is how leftover processes are found.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "battery/catalog.h"
#include "battery/report.h"
#include "battery/test_internet.h"
#include "launch/http_profile.h"
#include "launch/profile.h"

namespace smolvm_check {

struct RunOptions {
  int jobs = 1;
  std::string work_root;  // where per-case directories go; default a fresh /tmp dir
  // Where egress cases run: the whole sandbox under test in its uplink namespace, with its DNS
  // server as the host's. RunBattery builds one when a case needs it and none is given; an
  // egress case without one skips, saying why (internet_unavailable).
  const TestInternet* internet = nullptr;
  std::string internet_unavailable;
  bool keep_stdout = false;  // CaseReport::stdout_data, for the bench's measures
  // "K=V" for the sandbox's own environment, beside the runner's: mutate's SMOLBOX_DISABLE.
  std::vector<std::string> sandbox_env;
  // An http profile's: its socket and volume root, and the copy of the payloads beneath that
  // root, which RunBattery makes; a server that could not start errs every case.
  std::optional<HttpRunValues> http;
  std::string payload_source;
  std::string server_unavailable;
};

struct Progress {
  size_t done = 0;
  size_t total = 0;
  size_t passed = 0;
  size_t failed = 0;  // fail + error
  std::string current;
};

CaseReport RunCase(const Profile& profile, const Case& c, const std::string& payload_dir,
                   const RunOptions& options);
std::vector<CaseReport> RunBattery(const Profile& profile, const std::vector<Case>& cases,
                                   const std::string& payload_dir, const RunOptions& options,
                                   const std::function<void(const Progress&)>& on_progress);

}  // namespace smolvm_check
