// The API rows of `smolvm-check bench`: python `print(42)` as a client of `smolbox serve` sends
// it, timed from the request's start to the whole reply, against the bare interpreter run
// directly with the same arguments:
//
//   API run, pooled   POST /v1/run, served by a warm pool's sandbox (serve --pool BACKEND=2)
//   API run           POST /v1/run that starts a sandbox of its own (a server with no pool)
//   API exec          POST /v1/sandboxes/{id}/exec into a sandbox created before the runs
//
// Only smolbox's own sandboxes (and null, the floor) have these rows. Before each pooled
// sample the bench waits, untimed, for the pool to be full again, so that every pooled sample
// is a hit; a reply without Smolbox-Pooled counts as a failed sample.
//
// A burst sends N runs at once, each from its own client, to the server with no pool and then
// to the pooled one (serve's default --max-concurrent-execs 16, the rest waiting in its queue),
// each printing a token of its own; a sample is one request's latency, and the burst's
// throughput is N over its wall time. The null floor runs the same N bare interpreters 16 at a
// time, each timed from the burst's start, as a request waits from its own.
//
//   auto api = ApiBench::Start(profile);       // two servers, and a sandbox for the execs
//   auto ms = (*api)->Sample(ApiPath::kPooledRun);
//   // ~ApiBench: the sandbox removed, the servers stopped with SIGTERM
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "launch/profile.h"
#include "smolbox/error.h"

namespace smolvm_check {

enum class ApiPath { kPooledRun, kRun, kExec };

bool HasApiPath(const Profile& profile);

// A burst's figures: each answered request's latency in ms, why the others do not count, and the
// whole burst's wall time.
struct BurstResult {
  std::vector<int64_t> ms;
  std::vector<std::string> failures;
  double seconds = 0;
};

class ApiBench {
 public:
  static Expected<std::unique_ptr<ApiBench>> Start(const Profile& profile);
  ~ApiBench();
  ApiBench(const ApiBench&) = delete;
  ApiBench& operator=(const ApiBench&) = delete;

  // One timed request (or, for null, one bare run): its wall time in ms, or why it does not
  // count (a status other than exited 0, output other than 42, a pooled run that was not).
  Expected<int64_t> Sample(ApiPath path);
  // count one-shot runs at once, to the pooled server or the one without a pool.
  BurstResult Burst(int count, bool pooled);

 private:
  struct Server {
    pid_t pid = -1;
    std::string socket;
  };
  ApiBench() = default;
  // smolbox serve on <dir>/<name>.sock, once it says it listens.
  Expected<Server> Launch(const std::string& name, const std::vector<std::string>& extra);
  Expected<void> WaitForFullPool();
  BurstResult BareBurst(int count) const;

  std::vector<std::string> python_;  // the interpreter's words
  std::string spec_;                 // the sandbox every request asks for, as JSON
  std::string pool_name_;
  std::string smolbox_;              // empty for the bare interpreter
  std::string dir_;                  // the servers' sockets
  Server pooled_, plain_;
  std::string sandbox_id_;           // the exec row's
};

}  // namespace smolvm_check
