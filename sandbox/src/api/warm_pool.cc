#include "warm_pool.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "api_requests.h"
#include "client.h"

namespace smolbox::api {
namespace {

// A pool holds at most this many: each is a live sandbox with its keeper.
constexpr int kMaxPoolSize = 64;
// After a failed create, the next waits this long, doubling up to the most.
constexpr auto kFirstBackoff = std::chrono::milliseconds(250);
constexpr auto kMostBackoff = std::chrono::seconds(30);
// A refill (a create, a removal) costs about what a run does: while runs taken from the pool are
// in flight it waits, so as not to slow them, but never longer than this.
constexpr auto kYieldToRuns = std::chrono::seconds(1);
// Run in each new pooled sandbox before it is offered, so that the first request does not pay
// for a cold page cache (in a VM, the guest's) or, under emulation, for translating the
// interpreter. Python only: under TCG a node run evicts python's translations from QEMU's
// cache, and a run of python after it is as slow as a first one. An image without python3 is
// left cold.
constexpr const char* kWarmUp = "[ -x /usr/bin/python3 ] && exec /usr/bin/python3 -c 'print(0)'; true";
constexpr int64_t kWarmUpTimeoutMs = 120000;
constexpr int kWarmUpExecs = 2;

Error PoolError(const std::string& text, const std::string& reason) {
  return Error::Field("--pool", fmt::format("{:?}: {}", text, reason));
}

}  // namespace

Expected<PoolOption> ParsePoolOption(const std::string& text) {
  auto equals = text.rfind('=');
  if (equals == std::string::npos) return std::unexpected(PoolError(text, "must be BACKEND[:IMAGE]=N"));
  PoolOption pool;
  pool.name = text.substr(0, equals);
  std::string count = text.substr(equals + 1);
  auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), pool.size);
  if (ec != std::errc() || end != count.data() + count.size() || pool.size < 1 || pool.size > kMaxPoolSize) {
    return std::unexpected(PoolError(text, fmt::format("N must be a whole number from 1 to {}", kMaxPoolSize)));
  }
  // The image may hold colons of its own (name:tag): the backend ends at the first.
  auto colon = pool.name.find(':');
  std::string backend = pool.name.substr(0, colon);
  nlohmann::json spec;
  if (backend == "ns" || backend == "vm") {
    spec["backend"] = backend;
  } else if (backend == "vm-kvm" || backend == "vm-tcg") {
    spec["backend"] = "vm";
    spec["accel"] = backend.substr(3);
  } else {
    return std::unexpected(PoolError(text, fmt::format("BACKEND must be ns, vm, vm-kvm or vm-tcg (got {:?})", backend)));
  }
  if (colon != std::string::npos) spec["image"] = pool.name.substr(colon + 1);
  pool.create_json = spec.dump();
  // As a client's create would be checked: a local image by name, and it must exist.
  auto parsed = ParseCreateRequest(pool.create_json);
  if (!parsed) return std::unexpected(PoolError(text, parsed.error().ToString()));
  pool.spec = std::move(*parsed);
  return pool;
}

bool PoolServes(const RunSpec& pool, const RunSpec& run) {
  if (run.sandbox != pool.sandbox || run.exec.stdin_file) return false;
  // An exec order carries its own timeout; the other exec limits are the sandbox's defaults.
  ExecLimits limits = run.exec.limits;
  limits.timeout_ms = pool.exec.limits.timeout_ms;
  return limits == pool.exec.limits;
}

WarmPool::WarmPool(std::vector<PoolOption> pools, Launcher launcher) : launcher_(std::move(launcher)) {
  for (PoolOption& option : pools) pools_.push_back(Pool{std::move(option), {}, 0, {}});
}

WarmPool::~WarmPool() { Stop(); }

void WarmPool::Start() {
  if (!pools_.empty()) thread_ = std::thread([this] { Refill(); });
}

void WarmPool::Stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::vector<std::string> ids;
  {
    std::lock_guard lock(mutex_);
    for (Pool& pool : pools_) {
      ids.insert(ids.end(), pool.ready.begin(), pool.ready.end());
      pool.ready.clear();
    }
    ids.insert(ids.end(), discarded_.begin(), discarded_.end());
    discarded_.clear();
  }
  for (const std::string& id : ids) {
    if (auto removed = persist::RemoveSandbox(id, true); !removed) {
      fmt::print(stderr, "smolbox serve: pool: {}\n", removed.error().ToString());
    }
  }
}

std::optional<std::string> WarmPool::Take(const RunSpec& spec) {
  std::lock_guard lock(mutex_);
  for (Pool& pool : pools_) {
    if (pool.ready.empty() || !PoolServes(pool.option.spec, spec)) continue;
    std::string id = std::move(pool.ready.front());
    pool.ready.pop_front();
    if (in_use_++ == 0) quiet_after_ = std::chrono::steady_clock::now() + kYieldToRuns;
    wake_.notify_all();  // to refill once quiet_after_ has passed, if the run is still going
    return id;
  }
  return std::nullopt;
}

void WarmPool::Discard(std::string id) {
  {
    std::lock_guard lock(mutex_);
    discarded_.push_back(std::move(id));
    if (--in_use_ == 0) quiet_after_ = {};
  }
  wake_.notify_all();
}

std::vector<PoolSize> WarmPool::Sizes() {
  std::lock_guard lock(mutex_);
  std::vector<PoolSize> sizes;
  for (const Pool& pool : pools_) {
    sizes.push_back({pool.option.name, static_cast<int>(pool.ready.size()), pool.option.size});
  }
  return sizes;
}

void WarmPool::Refill() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (RefillStep(lock)) continue;
    // Nothing to do now: wait for a take, a discard, the stop, or a backoff's or the runs' end.
    auto until = std::chrono::steady_clock::time_point::max();
    for (const Pool& pool : pools_) {
      if (static_cast<int>(pool.ready.size()) < pool.option.size) until = std::min(until, std::max(pool.next_try, quiet_after_));
    }
    if (!discarded_.empty()) until = std::min(until, quiet_after_);
    if (until == std::chrono::steady_clock::time_point::max()) {
      wake_.wait(lock);
    } else {
      wake_.wait_until(lock, until);
    }
  }
}

bool WarmPool::WarmUp(const std::string& id) {
  persist::ExecOrder order;
  order.argv = {"/bin/sh", "-c", kWarmUp};
  order.timeout_ms = kWarmUpTimeoutMs;
  RunResult result;
  for (int i = 0; i < kWarmUpExecs && result.status != Status::kSetupError; ++i) {
    result = persist::ExecInSandbox(id, order, ExecIo{}, launcher_.cancel_fd);
  }
  // A sandbox whose exec is refused is dead; one with no sh (a distroless image) is merely cold.
  if (result.status != Status::kSetupError) return true;
  fmt::print(stderr, "smolbox serve: pool: sandbox {} failed its warm-up: {}\n", id, result.error);
  return false;
}

bool WarmPool::RefillStep(std::unique_lock<std::mutex>& lock) {
  auto now = std::chrono::steady_clock::now();
  if (now < quiet_after_) return false;
  // Used sandboxes go first: they hold memory and a keeper each.
  if (!discarded_.empty()) {
    std::string id = std::move(discarded_.front());
    discarded_.pop_front();
    lock.unlock();
    auto removed = persist::RemoveSandbox(id, true);
    if (!removed) fmt::print(stderr, "smolbox serve: pool: {}\n", removed.error().ToString());
    lock.lock();
    return true;
  }
  for (Pool& pool : pools_) {  // pools_ never changes size: the reference outlives the unlock
    if (static_cast<int>(pool.ready.size()) >= pool.option.size || now < pool.next_try) continue;
    auto id = NewSandboxId();
    if (!id) {
      fmt::print(stderr, "smolbox serve: pool {}: {}\n", pool.option.name, id.error().ToString());
      pool.next_try = now + kMostBackoff;
      return true;
    }
    lock.unlock();
    auto setup = launcher_.Create(*id, pool.option.create_json);
    bool created = setup.has_value();  // a failed create leaves nothing; a failed warm-up does
    if (created && !WarmUp(*id)) setup = std::unexpected(Error::Field("sandbox", "died in its warm-up"));
    lock.lock();
    if (setup) {
      pool.failures = 0;
      (stopping_ ? discarded_ : pool.ready).push_back(*id);
    } else {
      // A pool that cannot be filled serves nothing; requests start their own sandboxes.
      if (created) discarded_.push_back(*id);
      auto wait = std::min<std::chrono::milliseconds>(kMostBackoff, kFirstBackoff * (1 << std::min(pool.failures, 7)));
      ++pool.failures;
      pool.next_try = std::chrono::steady_clock::now() + wait;
      fmt::print(stderr, "smolbox serve: pool {}: {}; trying again in {} ms\n", pool.option.name,
                 setup.error().ToString(), wait.count());
    }
    return true;
  }
  return false;
}

}  // namespace smolbox::api
