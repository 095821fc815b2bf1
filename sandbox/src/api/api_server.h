// `smolbox serve`: the HTTP API (docs/api.md). One-shot runs and creates happen in child
// `smolbox` processes (smolbox_child.h); execs talk to the sandbox's keeper directly.
//
//   POST   /v1/run                      a RunSpec in, run's result JSON out
//   POST   /v1/sandboxes                create: a RunSpec without argv; 201 with its id
//   GET    /v1/sandboxes[/{id}]         list, or one
//   DELETE /v1/sandboxes/{id}           stop and remove, mid-exec too
//   POST   /v1/sandboxes/{id}/exec      an exec, streamed as NDJSON (exec_stream.h)
//   GET    /v1/health, GET /metrics
//
// Sandboxes the server creates are tied to it: a lifeline pipe whose write end only the server
// holds. When the server dies, however it dies, their keepers see the pipe hang up and tear
// them down; the next start removes what is left of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "listen_address.h"
#include "warm_pool.h"

namespace smolbox::api {

struct ServeOptions {
  std::vector<ListenAddress> listen;
  std::string token_file;  // required by tcp listeners
  std::string tls_cert, tls_key;  // required by tcp listeners off loopback
  int max_sandboxes = 32;
  size_t max_body = 64 << 20;
  int max_concurrent_execs = 16;  // runs and execs at once
  int max_queued = 512;  // runs and execs that wait for one of those, in order (exec_queue.h)
  // The longest one waits, whatever its own timeout: the server cannot see a client that hangs up
  // while its request waits, so this bounds how long such a request holds its place.
  int64_t max_queue_wait_ms = 300000;
  int64_t drain_timeout_ms = 30000;  // on SIGTERM, how long in-flight requests may finish
  std::string smolbox_exe;  // the smolbox binary children run
  std::vector<PoolOption> pools;  // --pool: sandboxes kept ready for one-shot runs
  std::string volume_root;  // --volume-root: where requests' volumes are, beneath; empty: none
};

// The default listener: <state root>/api.sock (/run/smolbox for root, else under
// $XDG_RUNTIME_DIR).
Expected<ListenAddress> DefaultListenAddress();

// Serves until SIGTERM, SIGINT or SIGHUP, then drains; returns the process's exit code. Errors in
// the options are printed naming the flag, and nothing is started.
int Serve(const ServeOptions& options);

}  // namespace smolbox::api
