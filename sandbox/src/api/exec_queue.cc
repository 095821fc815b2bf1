#include "exec_queue.h"

#include <algorithm>

namespace smolbox::api {

std::expected<ExecQueue::Slot, ExecQueue::Refusal> ExecQueue::Take(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  if (closed_) return std::unexpected(Refusal::kClosed);
  auto give = [this] {
    ++running_;
    return Slot(reinterpret_cast<void*>(1), [this](void*) { Release(); });
  };
  if (running_ < slots_ && waiting_.empty()) return give();
  if (static_cast<int>(waiting_.size()) >= max_queued_) {
    ++totals_.refused_full;
    return std::unexpected(Refusal::kFull);
  }
  uint64_t ticket = next_ticket_++;
  waiting_.push_back(ticket);
  auto since = std::chrono::steady_clock::now();
  bool turn = changed_.wait_until(lock, deadline, [&] {
    return closed_ || (waiting_.front() == ticket && running_ < slots_);
  });
  waiting_.erase(std::find(waiting_.begin(), waiting_.end(), ticket));
  ++totals_.waits;
  totals_.wait_seconds_sum += std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
  // Whoever is at the head now may have its turn: this one has left it, or taken one slot of
  // several that are free.
  changed_.notify_all();
  if (closed_) return std::unexpected(Refusal::kClosed);
  if (!turn) {
    ++totals_.timed_out;
    return std::unexpected(Refusal::kTimedOut);
  }
  return give();
}

void ExecQueue::Release() {
  std::lock_guard lock(mutex_);
  --running_;
  changed_.notify_all();
}

void ExecQueue::Close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
  changed_.notify_all();
}

ExecQueue::Stats ExecQueue::Snapshot() const {
  std::lock_guard lock(mutex_);
  Stats stats = totals_;
  stats.running = running_;
  stats.queued = static_cast<int>(waiting_.size());
  return stats;
}

}  // namespace smolbox::api
