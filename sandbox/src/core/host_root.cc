#include "host_root.h"

#include <unistd.h>

#include <fstream>
#include <string>

namespace smolbox {

bool IsHostRoot() {
  if (geteuid() != 0) return false;
  // The host's own user namespace maps every id onto itself, in one line.
  std::ifstream map("/proc/self/uid_map");
  uint64_t inside = 1, outside = 1, count = 0;
  std::string rest;
  if (!(map >> inside >> outside >> count)) return false;
  return inside == 0 && outside == 0 && count == 4294967295ULL && !(map >> rest);
}

}  // namespace smolbox
