// cgroups: which hierarchy this host runs (v1, v2 or hybrid), and where this user may place a
// run's memory, cpu and pids limits. It follows the runtime's own choice (src/shared/cgroup.cc):
// root uses a smolbox subtree at the top of v2; others need a delegated v2 cgroup; any
// controller v2 cannot hold falls back to its v1 hierarchy.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>

#include "cgroup_hierarchies.h"
#include "probe.h"

namespace smolbox::host {
namespace {

using Hierarchies = CgroupHierarchies;

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
  Hierarchies h = ParseCgroupHierarchies(view.Read("/proc/self/mountinfo").value_or(""),
                                         view.Read("/proc/self/cgroup").value_or(""));
  section.checks.push_back(HierarchyCheck(h));
  section.checks.push_back(V2ControllersCheck(view, h));
  section.checks.push_back(LimitsCheck(view, h));
  return section;
}

}  // namespace smolbox::host
