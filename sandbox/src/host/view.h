// Where the probe's facts come from: this machine, or a fixture that replays another one.
//
// Every read goes through HostView, which records the path: that record is the list the
// capture script copies, so the code and the fixture format cannot drift apart.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "smolbox/error.h"
#include "smolbox/host.h"

namespace smolbox::host {

// What stat(2) says about a path, or what a fixture's stat.json recorded for it.
struct Node {
  std::string type;  // "char", "block", "dir", "file" or "other"
  unsigned major = 0;
  unsigned minor = 0;
  unsigned mode = 0;  // permission bits
  uid_t uid = 0;
  gid_t gid = 0;
  std::string user;   // the owner's name, for messages
  std::string group;  // the owning group's name
};

class HostView {
 public:
  static HostView Live();
  // Fails when root is not a fixture: no such directory, no proc/, or a bad stat.json/host.json.
  static Expected<HostView> Fixture(const std::string& root);

  bool live() const { return root_.empty(); }
  const std::string& root() const { return root_; }
  uid_t uid() const { return uid_; }
  const std::vector<gid_t>& groups() const { return groups_; }
  // The CPUID hypervisor vendor: live, or host.json's "cpuid_hypervisor".
  const std::string& cpuid_hypervisor() const { return cpuid_hypervisor_; }

  std::optional<std::string> Read(const std::string& path);
  bool Exists(const std::string& path);
  std::optional<Node> Stat(const std::string& path);
  // Whether this user may open path with mode (R_OK | W_OK ...), as the kernel would judge.
  bool Access(const std::string& path, int mode);

  const std::vector<ProbedPath>& probed() const { return probed_; }

 private:
  void Record(ProbedPath::Kind kind, const std::string& path);
  std::string Below(const std::string& path) const { return root_ + path; }

  std::string root_;
  uid_t uid_ = 0;
  std::vector<gid_t> groups_;
  std::string cpuid_hypervisor_;
  std::map<std::string, Node> nodes_;  // stat.json
  std::vector<ProbedPath> probed_;
  std::set<std::pair<int, std::string>> seen_;
};

// Judges mode bits the way the kernel does for an unprivileged user; uid 0 may read and write
// anything (CAP_DAC_OVERRIDE).
bool Permits(const Node& node, uid_t uid, const std::vector<gid_t>& groups, int mode);

// "0660 root:kvm"
std::string Describe(const Node& node);

}  // namespace smolbox::host
