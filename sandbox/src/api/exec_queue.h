// The server's runs and execs at once (--max-concurrent-execs), with a bounded FIFO queue in
// front of them (--max-queued). A service for agents gets bursts: a request over the cap waits
// its turn, in the order it came, until a slot frees or its own deadline passes. Only a request
// that finds the queue full is refused at once, and the server answers it 429 with Retry-After.
//
//   ExecQueue queue(16, 256);
//   auto slot = queue.Take(std::chrono::steady_clock::now() + timeout);  // waits while queued
//   if (!slot) return Refuse(slot.error());
//   ...                          // the slot is freed when its last copy goes
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <expected>
#include <memory>
#include <mutex>

namespace smolbox::api {

class ExecQueue {
 public:
  enum class Refusal {
    kFull,      // max_queued requests wait already
    kTimedOut,  // its deadline passed while it waited
    kClosed,    // the server is draining
  };
  using Slot = std::shared_ptr<void>;

  struct Stats {
    int running = 0;
    int queued = 0;
    int64_t waits = 0;            // requests that waited in the queue, whatever the outcome
    double wait_seconds_sum = 0;  // and how long they waited, together
    int64_t refused_full = 0;
    int64_t timed_out = 0;
  };

  ExecQueue(int slots, int max_queued) : slots_(slots), max_queued_(max_queued) {}
  ExecQueue(const ExecQueue&) = delete;
  ExecQueue& operator=(const ExecQueue&) = delete;

  // A slot at once when one is free and nobody waits; else a place in the queue until its turn
  // comes with a free slot, or until deadline. The queue must outlive every slot it gave.
  std::expected<Slot, Refusal> Take(std::chrono::steady_clock::time_point deadline);
  // Refuses every waiter, and every request from now on, as kClosed.
  void Close();
  Stats Snapshot() const;

 private:
  void Release();

  const int slots_;
  const int max_queued_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  int running_ = 0;
  uint64_t next_ticket_ = 0;
  std::deque<uint64_t> waiting_;  // tickets, the oldest first
  bool closed_ = false;
  Stats totals_;
};

}  // namespace smolbox::api
