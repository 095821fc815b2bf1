// cgroups: which hierarchy this host runs (v1, v2 or hybrid), and where this user may place a
// run's memory, cpu and pids limits. It follows the runtime's own choice (src/ns/cgroup.cc):
// root uses a smolbox subtree at the top of v2; others need a delegated v2 cgroup; any
// controller v2 cannot hold falls back to its v1 hierarchy.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "probe.h"

namespace smolbox::host {
namespace {

struct Hierarchies {
  std::optional<std::string> v2_mount;
  std::string v2_self;                          // our cgroup in v2, "" for the root
  std::map<std::string, std::string> v1_mount;  // controller -> mount point
  std::map<std::string, std::string> v1_self;   // controller -> our cgroup
};

const std::vector<std::string> kV1Controllers = {
    "cpu",   "cpuacct",    "cpuset",   "memory",  "devices", "freezer", "net_cls",
    "blkio", "perf_event", "net_prio", "hugetlb", "pids",    "rdma",    "misc"};

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, sep);) parts.push_back(part);
  return parts;
}

void ParseMountinfo(const std::string& mountinfo, Hierarchies& h) {
  std::istringstream in(mountinfo);
  for (std::string line; std::getline(in, line);) {
    auto fields = Split(line, ' ');
    auto dash = std::find(fields.begin(), fields.end(), "-");
    // mountinfo: id parent dev root mountpoint options ... - fstype source superoptions
    if (fields.size() < 5 || dash == fields.end() || fields.end() - dash < 4) continue;
    if (*(dash + 1) == "cgroup2" && !h.v2_mount) h.v2_mount = fields[4];
    if (*(dash + 1) != "cgroup") continue;
    for (const auto& option : Split(*(dash + 3), ',')) {
      if (std::find(kV1Controllers.begin(), kV1Controllers.end(), option) != kV1Controllers.end()) {
        h.v1_mount.emplace(option, fields[4]);
      }
    }
  }
}

// /proc/self/cgroup: "0::/path" for v2, "N:controller,...:/path" for each v1 hierarchy.
void ParseSelf(const std::string& self, Hierarchies& h) {
  std::istringstream in(self);
  for (std::string line; std::getline(in, line);) {
    auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    std::string path = line.substr(second + 1);
    if (path == "/") path.clear();
    std::string controllers = line.substr(first + 1, second - first - 1);
    if (controllers.empty()) h.v2_self = path;
    for (const auto& c : Split(controllers, ',')) h.v1_self[c] = path;
  }
}

Check HierarchyCheck(const Hierarchies& h) {
  const char* name = "hierarchy";
  std::vector<std::string> v1;
  for (const auto& [controller, mount] : h.v1_mount) v1.push_back(controller);
  if (h.v2_mount && v1.empty()) return Pass(name, fmt::format("v2 at {}", *h.v2_mount));
  if (h.v2_mount) {
    return Pass(name, fmt::format("hybrid: v2 at {}, v1 for {}", *h.v2_mount, fmt::join(v1, " ")));
  }
  if (!v1.empty()) return Pass(name, fmt::format("v1 for {}", fmt::join(v1, " ")));
  return Fail(name, "no cgroup hierarchy in /proc/self/mountinfo",
              "mount cgroup2 on /sys/fs/cgroup; without it limits fall back to rlimits");
}

// Where this user may create a run's cgroup for one controller, or empty.
std::string Place(HostView& view, const Hierarchies& h, const std::string& v2_base,
                  const std::string& v2_available, const std::string& controller) {
  if (!v2_base.empty() && HasWord(v2_available, controller)) return "v2";
  auto mount = h.v1_mount.find(controller);
  if (mount == h.v1_mount.end()) return "";
  auto self = h.v1_self.find(controller);
  std::string dir = mount->second + (self == h.v1_self.end() ? "" : self->second);
  return view.Access(dir, W_OK) ? "v1" : "";
}

// The v2 cgroup under which runs go, if this user may create them there.
std::string V2Base(HostView& view, const Hierarchies& h, std::string& available) {
  if (!h.v2_mount) return "";
  std::string top = *h.v2_mount;
  if (view.uid() == 0) {
    available = view.Read(top + "/cgroup.controllers").value_or("");
    return view.Access(top, W_OK) ? top + "/smolbox" : "";
  }
  // Rootless: only a cgroup delegated to us, whose subtree_control we may write.
  std::string own = top + h.v2_self;
  available = view.Read(own + "/cgroup.controllers").value_or("");
  bool delegated = view.Access(own, W_OK) && view.Access(own + "/cgroup.subtree_control", W_OK);
  return delegated ? own : "";
}

Check LimitsCheck(HostView& view, const Hierarchies& h) {
  const char* name = "memory, cpu and pids limits";
  std::string available;
  std::string v2_base = V2Base(view, h, available);
  std::vector<std::string> placed, missing;
  for (const char* controller : {"memory", "cpu", "pids"}) {
    std::string where = Place(view, h, v2_base, available, controller);
    if (where.empty())
      missing.push_back(controller);
    else
      placed.push_back(fmt::format("{} {}", controller, where));
  }
  std::string who = view.uid() == 0 ? "root" : fmt::format("uid {}", view.uid());
  if (missing.empty())
    return Pass(name, fmt::format("writable for {}: {}", who, fmt::join(placed, ", ")));
  std::string detail = fmt::format("no writable cgroup for {} as {}; runs fall back to rlimits",
                                   fmt::join(missing, ", "), who);
  if (!placed.empty()) detail += fmt::format(" (writable: {})", fmt::join(placed, ", "));
  return Warn(name, detail,
              view.uid() == 0 ? "mount the missing controllers"
                              : "run under a delegated cgroup: systemd-run --user --scope -p "
                                "Delegate=yes smolbox ...");
}

Check V2ControllersCheck(HostView& view, const Hierarchies& h) {
  const char* name = "v2 controllers";
  if (!h.v2_mount) return Warn(name, "no cgroup v2 mounted");
  auto text = view.Read(*h.v2_mount + "/cgroup.controllers");
  if (!text) return Warn(name, fmt::format("cannot read {}/cgroup.controllers", *h.v2_mount));
  std::string list = Trim(*text);
  return Pass(name, list.empty() ? "none (all are bound to v1)" : list);
}

}  // namespace

Section ProbeCgroups(HostView& view) {
  Section section{"cgroups", {}};
  Hierarchies h;
  ParseMountinfo(view.Read("/proc/self/mountinfo").value_or(""), h);
  ParseSelf(view.Read("/proc/self/cgroup").value_or(""), h);
  section.checks.push_back(HierarchyCheck(h));
  section.checks.push_back(V2ControllersCheck(view, h));
  section.checks.push_back(LimitsCheck(view, h));
  return section;
}

}  // namespace smolbox::host
