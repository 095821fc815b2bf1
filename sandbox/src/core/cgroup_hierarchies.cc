#include "cgroup_hierarchies.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

namespace smolbox {
namespace {

// A v1 mount's superoptions mix its controllers with rw, name=systemd and the like.
constexpr std::array<std::string_view, 14> kV1Controllers = {
    "cpu",   "cpuacct",    "cpuset",   "memory",  "devices", "freezer", "net_cls",
    "blkio", "perf_event", "net_prio", "hugetlb", "pids",    "rdma",    "misc"};

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, sep);) parts.push_back(part);
  return parts;
}

// mountinfo escapes space, tab, newline and backslash in paths as \ooo.
std::string Unescape(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    bool octal = field[i] == '\\' && i + 3 < field.size() &&
                 std::all_of(field.begin() + i + 1, field.begin() + i + 4, [](char c) { return c >= '0' && c <= '7'; });
    if (octal) {
      out += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 + (field[i + 3] - '0'));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

std::string ReadWhole(const char* path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void ParseMountinfo(const std::string& mountinfo, CgroupHierarchies& h) {
  std::istringstream in(mountinfo);
  for (std::string line; std::getline(in, line);) {
    // id parent dev root mountpoint options [optional...] - fstype source superoptions
    auto fields = Split(line, ' ');
    auto dash = std::find(fields.begin(), fields.end(), "-");
    if (fields.size() < 5 || dash == fields.end() || fields.end() - dash < 4) continue;
    std::string mount = Unescape(fields[4]);
    if (dash[1] == "cgroup2" && !h.v2_mount) h.v2_mount = mount;
    if (dash[1] != "cgroup") continue;
    for (const auto& option : Split(dash[3], ',')) {
      if (std::find(kV1Controllers.begin(), kV1Controllers.end(), option) != kV1Controllers.end()) {
        h.v1_mount.emplace(option, mount);
      }
    }
  }
}

// "0::/path" for v2, "N:controller,...:/path" for each v1 hierarchy.
void ParseSelf(const std::string& self, CgroupHierarchies& h) {
  std::istringstream in(self);
  for (std::string line; std::getline(in, line);) {
    auto first = line.find(':');
    auto second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    std::string path = line.substr(second + 1);
    if (path == "/") path.clear();
    std::string controllers = line.substr(first + 1, second - first - 1);
    if (controllers.empty()) h.v2_self = path;
    for (const auto& c : Split(controllers, ',')) h.v1_self[c] = path;
  }
}

}  // namespace

CgroupHierarchies ParseCgroupHierarchies(const std::string& mountinfo, const std::string& self_cgroup) {
  CgroupHierarchies h;
  ParseMountinfo(mountinfo, h);
  ParseSelf(self_cgroup, h);
  return h;
}

CgroupHierarchies DiscoverCgroupHierarchies() {
  return ParseCgroupHierarchies(ReadWhole("/proc/self/mountinfo"), ReadWhole("/proc/self/cgroup"));
}

}  // namespace smolbox
