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
  auto& list = entries_[address];
  for (Entry& e : list) {
    if (e.name == name) {
      e.expires = std::max(e.expires, expires);
      return;
    }
  }
  if (count_ >= kMaxEntries) DropExpired(now);
  while (count_ >= kMaxEntries) {
    // Full of live answers: forget the one closest to expiring.
    auto oldest = entries_.end();
    size_t index = 0;
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      for (size_t i = 0; i < it->second.size(); ++i) {
        if (oldest == entries_.end() || it->second[i].expires < oldest->second[index].expires) {
          oldest = it;
          index = i;
        }
      }
    }
    oldest->second.erase(oldest->second.begin() + static_cast<long>(index));
    --count_;
    if (oldest->second.empty() && &oldest->second != &list) entries_.erase(oldest);
  }
  list.push_back(Entry{name, expires});
  ++count_;
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
