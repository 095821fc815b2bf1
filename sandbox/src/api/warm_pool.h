// Warm pools for `smolbox serve --pool BACKEND[:IMAGE]=N`: N sandboxes of that configuration
// created in advance, so that a one-shot POST /v1/run that matches skips the sandbox's setup.
//
//   WarmPool pool(pools, launcher);
//   pool.Start();                          // fills every pool in the background
//   if (auto id = pool.Take(spec)) {       // a ready sandbox, now the caller's alone
//     ... one exec in *id ...
//     pool.Discard(*id);                   // destroyed in the background, never reused
//   }
//   pool.Stop();                           // on drain: every pooled sandbox removed
//
// A pooled sandbox serves one request only: another tenant never gets a sandbox someone's code
// has run in. Pooled sandboxes are the server's, not a client's: they are not listed, cannot be
// exec'd into by id, and do not count against --max-sandboxes.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "launch.h"
#include "smolbox/error.h"
#include "smolbox/spec.h"

namespace smolbox::api {

// --pool BACKEND[:IMAGE]=N: BACKEND is ns, vm, vm-kvm or vm-tcg; IMAGE a local image's name.
struct PoolOption {
  std::string name;         // "BACKEND[:IMAGE]", as given
  std::string create_json;  // the spec each of its sandboxes is created from
  RunSpec spec;             // that spec, parsed
  int size = 0;
};
Expected<PoolOption> ParsePoolOption(const std::string& text);

// Whether a run of `run` may happen in a sandbox created from `pool`: the same sandbox in
// every respect (backend, image, limits, user, network, ...), and no exec limit an exec
// order cannot carry set otherwise than the pool's sandbox would apply. Only the command, its
// stdin, env, working directory and timeout may differ.
bool PoolServes(const RunSpec& pool, const RunSpec& run);

struct PoolSize {
  std::string name;
  int ready = 0;
  int size = 0;
};

class WarmPool {
 public:
  WarmPool(std::vector<PoolOption> pools, Launcher launcher);
  ~WarmPool();

  void Start();
  // Stops refilling and removes every sandbox the pools hold or were handed back.
  void Stop();
  // A ready sandbox of the first pool that serves spec, taken out of the pool; nothing when no
  // pool serves it or none is ready.
  std::optional<std::string> Take(const RunSpec& spec);
  // Hands a taken sandbox back, to be destroyed.
  void Discard(std::string id);
  std::vector<PoolSize> Sizes();

 private:
  struct Pool {
    PoolOption option;
    std::deque<std::string> ready;
    int failures = 0;  // creates failed in a row: the next waits longer
    std::chrono::steady_clock::time_point next_try{};
  };

  void Refill();
  // Starts the interpreters once in a new sandbox; false when the sandbox turned out dead.
  bool WarmUp(const std::string& id);
  // One step of the refill thread's work, done without the lock; false when there is none.
  bool RefillStep(std::unique_lock<std::mutex>& lock);

  Launcher launcher_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Pool> pools_;
  std::deque<std::string> discarded_;
  int in_use_ = 0;  // sandboxes taken and not handed back
  std::chrono::steady_clock::time_point quiet_after_{};  // no refill before, while runs are in flight
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace smolbox::api
