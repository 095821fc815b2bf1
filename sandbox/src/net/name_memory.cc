#include "name_memory.h"

#include <algorithm>

namespace smolbox::net {

void NameMemory::DropExpired(Clock::time_point now) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto& list = it->second;
    size_t before = list.size();
    std::erase_if(list, [&](const Entry& e) { return e.expires <= now; });
    count_ -= before - list.size();
    it = list.empty() ? entries_.erase(it) : std::next(it);
  }
}

void NameMemory::Remember(const std::string& name, const IpAddress& address, uint32_t ttl_seconds,
                          Clock::time_point now) {
  uint32_t ttl = std::clamp(ttl_seconds, kMinTtlSeconds, kMaxTtlSeconds);
  auto expires = now + std::chrono::seconds(ttl);
  std::lock_guard lock(mutex_);
  if (auto it = entries_.find(address); it != entries_.end()) {
    for (Entry& e : it->second) {
      if (e.name == name) {
        e.expires = std::max(e.expires, expires);
        return;
      }
    }
  }
  if (count_ >= kMaxEntries) DropExpired(now);
  if (count_ >= kMaxEntries) DropSoonestToExpire();
  entries_[address].push_back(Entry{name, expires});
  ++count_;
}

void NameMemory::DropSoonestToExpire() {
  // Full of live answers: forget the one closest to expiring.
  auto soonest = entries_.begin();
  size_t index = 0;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    for (size_t i = 0; i < it->second.size(); ++i) {
      if (it->second[i].expires < soonest->second[index].expires) {
        soonest = it;
        index = i;
      }
    }
  }
  soonest->second.erase(soonest->second.begin() + static_cast<long>(index));
  --count_;
  if (soonest->second.empty()) entries_.erase(soonest);
}

std::vector<std::string> NameMemory::NamesFor(const IpAddress& address, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  std::vector<std::string> names;
  auto it = entries_.find(address);
  if (it == entries_.end()) return names;
  for (const Entry& e : it->second) {
    if (e.expires > now) names.push_back(e.name);
  }
  return names;
}

}  // namespace smolbox::net
