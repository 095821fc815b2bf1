// What the gateway's resolver answered: which allowed names each address was given for, until
// the answer's TTL runs out. A connection to an address is judged by the names it stands for
// here, so a name the workload never resolved through the gateway opens nothing.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "smolbox/egress_policy.h"

namespace smolbox::net {

class NameMemory {
 public:
  using Clock = std::chrono::steady_clock;
  // An answer's TTL is kept within these: 0 would expire before the connect that follows, and a
  // day would let a stale answer open an address long after its name moved.
  static constexpr uint32_t kMinTtlSeconds = 30;
  static constexpr uint32_t kMaxTtlSeconds = 3600;
  // Beyond this many entries the oldest go first: a workload resolving without end must not
  // grow the host's memory without end.
  static constexpr size_t kMaxEntries = 4096;

  void Remember(const std::string& name, const IpAddress& address, uint32_t ttl_seconds,
                Clock::time_point now = Clock::now());
  std::vector<std::string> NamesFor(const IpAddress& address, Clock::time_point now = Clock::now());

 private:
  struct Entry {
    std::string name;
    Clock::time_point expires;
  };
  struct Less {
    bool operator()(const IpAddress& a, const IpAddress& b) const {
      return std::tie(a.v6, a.bytes) < std::tie(b.v6, b.bytes);
    }
  };
  void DropExpired(Clock::time_point now);
  void DropSoonestToExpire();

  std::mutex mutex_;
  std::map<IpAddress, std::vector<Entry>, Less> entries_;
  size_t count_ = 0;
};

}  // namespace smolbox::net
