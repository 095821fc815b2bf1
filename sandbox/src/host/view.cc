#include "view.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "json_bounds.h"

namespace smolbox::host {
namespace {

using nlohmann::json;

// A fixture's host.json and stat.json are a few hundred bytes.
constexpr size_t kMaxFixtureJsonBytes = 1 << 20;

std::string TypeOf(mode_t mode) {
  if (S_ISCHR(mode)) return "char";
  if (S_ISBLK(mode)) return "block";
  if (S_ISDIR(mode)) return "dir";
  if (S_ISREG(mode)) return "file";
  return "other";
}

std::string UserName(uid_t uid) {
  if (const passwd* pw = getpwuid(uid)) return pw->pw_name;
  return std::to_string(uid);
}

std::string GroupName(gid_t gid) {
  if (const group* gr = getgrgid(gid)) return gr->gr_name;
  return std::to_string(gid);
}

std::vector<gid_t> LiveGroups() {
  std::vector<gid_t> groups(static_cast<size_t>(std::max(getgroups(0, nullptr), 0)));
  int n = getgroups(static_cast<int>(groups.size()), groups.data());
  groups.resize(static_cast<size_t>(std::max(n, 0)));
  groups.push_back(getegid());
  return groups;
}

Expected<json> LoadJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::unexpected(Error{path, "missing: a fixture needs it", 0});
  // One byte past the limit tells a file over it from one at it.
  std::string text(kMaxFixtureJsonBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return ParseBoundedJson(text, {.max_bytes = kMaxFixtureJsonBytes}, path);
}

// One stat.json entry: {"type": "char", "major": 10, "minor": 232, "mode": "0660", "uid": 0,
// "gid": 108, "user": "root", "group": "kvm"}.
Node ParseNode(const json& j) {
  Node n;
  n.type = j.at("type").get<std::string>();
  n.major = j.value("major", 0u);
  n.minor = j.value("minor", 0u);
  n.mode = static_cast<unsigned>(std::stoul(j.at("mode").get<std::string>(), nullptr, 8));
  n.uid = j.at("uid").get<uid_t>();
  n.gid = j.at("gid").get<gid_t>();
  n.user = j.value("user", std::to_string(n.uid));
  n.group = j.value("group", std::to_string(n.gid));
  return n;
}

}  // namespace

HostView HostView::Live() {
  HostView view;
  view.uid_ = geteuid();
  view.groups_ = LiveGroups();
  view.cpuid_hypervisor_ = LiveCpuidHypervisor();
  return view;
}

Expected<HostView> HostView::Fixture(const std::string& root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return std::unexpected(Error{root, "no such directory", 0});
  if (!fs::is_directory(fs::path(root) / "proc", ec)) {
    return std::unexpected(Error{root, "no proc/ below it, so it is not a host fixture", 0});
  }
  HostView view;
  view.root_ = fs::absolute(root).lexically_normal().string();
  if (view.root_.ends_with('/')) view.root_.pop_back();
  auto host = LoadJson(view.root_ + "/host.json");
  SMOLBOX_TRY(host);
  SMOLBOX_ASSIGN_OR_RETURN(auto nodes, LoadJson(view.root_ + "/stat.json"));
  try {
    view.uid_ = host->at("uid").get<uid_t>();
    view.groups_ = host->value("groups", std::vector<gid_t>{});
    view.cpuid_hypervisor_ = host->value("cpuid_hypervisor", "");
    for (const auto& [path, node] : nodes.items()) view.nodes_[path] = ParseNode(node);
  } catch (const std::exception& e) {
    return std::unexpected(Error{view.root_ + "/host.json or stat.json", e.what(), 0});
  }
  return view;
}

void HostView::Record(ProbedPath::Kind kind, const std::string& path) {
  if (seen_.emplace(static_cast<int>(kind), path).second) probed_.push_back({kind, path});
}

std::optional<std::string> HostView::Read(const std::string& path) {
  Record(ProbedPath::Kind::kFile, path);
  std::ifstream in(Below(path));
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool HostView::Exists(const std::string& path) {
  Record(ProbedPath::Kind::kExists, path);
  struct stat st {};
  // lstat: /proc/self/ns/* are symlinks that a fixture holds as plain files.
  return lstat(Below(path).c_str(), &st) == 0;
}

std::optional<Node> HostView::Stat(const std::string& path) {
  Record(ProbedPath::Kind::kStat, path);
  if (!live()) {
    auto it = nodes_.find(path);
    if (it == nodes_.end()) return std::nullopt;
    return it->second;
  }
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return std::nullopt;
  return Node{TypeOf(st.st_mode), major(st.st_rdev), minor(st.st_rdev),   st.st_mode & 07777,
              st.st_uid,          st.st_gid,         UserName(st.st_uid), GroupName(st.st_gid)};
}

bool HostView::Access(const std::string& path, int mode) {
  if (!live()) {
    auto node = Stat(path);
    return node && Permits(*node, uid_, groups_, mode);
  }
  Record(ProbedPath::Kind::kStat, path);
  // AT_EACCESS: judge the effective ids, which are the ones open() will use.
  return faccessat(AT_FDCWD, path.c_str(), mode, AT_EACCESS) == 0;
}

bool Permits(const Node& node, uid_t uid, const std::vector<gid_t>& groups, int mode) {
  if (uid == 0) return true;
  unsigned bits = node.mode & 07;
  if (node.uid == uid) {
    bits = (node.mode >> 6) & 07;
  } else if (std::find(groups.begin(), groups.end(), node.gid) != groups.end()) {
    bits = (node.mode >> 3) & 07;
  }
  unsigned want = ((mode & R_OK) ? 4u : 0u) | ((mode & W_OK) ? 2u : 0u) | ((mode & X_OK) ? 1u : 0u);
  return (bits & want) == want;
}

std::string Describe(const Node& node) {
  return fmt::format("{:04o} {}:{}", node.mode, node.user, node.group);
}

}  // namespace smolbox::host
