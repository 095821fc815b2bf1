#include "battery/case_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include <fmt/format.h>

#include "battery/canaries.h"
#include "launch/host_files.h"

namespace smolvm_check {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxOutputFileBytes = 1 << 20;
constexpr size_t kMaxSnapshotEntries = 100000;

std::string RandomSuffix() {
  std::random_device rd;
  return fmt::format("{:08x}", rd());
}

Expected<void> Plant(const std::string& dir, const CaseMount& mount) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return std::unexpected(Error{"mount " + mount.name, ec.message(), 0});
  // Any sandbox user must be able to write its outputs and read its inputs.
  chmod(dir.c_str(), mount.read_only && !mount.world_writable ? 0755 : 0777);
  for (const auto& [relative, content] : mount.files) {
    fs::path path = fs::path(dir) / relative;
    fs::create_directories(path.parent_path(), ec);
    std::ofstream out(path, std::ios::binary);
    out << content;
    if (!out.flush()) return std::unexpected(Error{"mount " + mount.name, "cannot plant " + relative, errno});
    chmod(path.c_str(), mount.world_writable ? 0666 : 0644);
  }
  return {};
}

// A walk that never follows symlinks and skips what it may not read.
template <typename Visit>
void Walk(const std::string& dir, Visit visit) {
  std::error_code ec;
  auto options = fs::directory_options::skip_permission_denied;
  for (auto it = fs::recursive_directory_iterator(dir, options, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    visit(it->path(), it->symlink_status(ec));
  }
}

}  // namespace

Expected<std::string> MakeWorkRoot() {
  char templ[] = "/tmp/smolvm-check-XXXXXX";
  if (!mkdtemp(templ)) return std::unexpected(Error::Sys("mkdtemp /tmp/smolvm-check-XXXXXX"));
  // Sandboxes that run as another uid must reach their mounts below it.
  chmod(templ, 0755);
  return std::string(templ);
}

Expected<CaseDir> CaseDir::Create(const std::string& work_root, const Case& c) {
  std::string root = fmt::format("{}/{}-{}", work_root, c.id, RandomSuffix());
  std::error_code ec;
  fs::create_directories(root + "/work", ec);
  if (ec) return std::unexpected(Error{"case " + c.id, "cannot create " + root + ": " + ec.message(), 0});
  CaseDir dir(root);
  chmod(root.c_str(), 0755);
  chmod(dir.Workdir().c_str(), 0777);
  fs::create_directories(root + "/mounts", ec);
  chmod((root + "/mounts").c_str(), 0755);
  for (const auto& mount : c.mounts) {
    if (mount.path_canary) {
      SMOLBOX_ASSIGN_OR_RETURN(auto token, NewCanaryToken());
      dir.path_tokens_[mount.name] = token;
    }
    SMOLBOX_TRY(Plant(dir.MountDir(mount.name), mount));
  }
  return dir;
}

std::string CaseDir::MountDir(const std::string& name) const {
  auto token = path_tokens_.find(name);
  std::string suffix = token == path_tokens_.end() ? "" : "-" + token->second;
  return root_ + "/mounts/" + name + suffix;
}

std::map<std::string, std::string> CaseDir::PathTokens() const {
  std::map<std::string, std::string> canaries;
  for (const auto& [mount, token] : path_tokens_) canaries["mount_path:" + mount] = token;
  return canaries;
}

CaseDir::~CaseDir() {
  if (root_.empty()) return;
  std::error_code ignored;
  fs::remove_all(root_, ignored);
}

std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> entries;
  Walk(dir, [&](const fs::path& path, const fs::file_status& status) {
    if (entries.size() >= kMaxSnapshotEntries) return;
    struct stat st{};
    if (lstat(path.c_str(), &st) != 0) return;
    std::string kind = fs::is_directory(status) ? "dir" : fs::is_regular_file(status) ? "file" : "other";
    entries[path.lexically_relative(dir).string()] =
        fmt::format("{} {} {}.{}", kind, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  });
  return entries;
}

std::map<std::string, std::string> ReadOutputs(const std::string& dir, const std::string& prefix) {
  std::map<std::string, std::string> outputs;
  Walk(dir, [&](const fs::path& path, const fs::file_status& status) {
    if (!fs::is_regular_file(status)) return;
    std::string relative = path.lexically_relative(dir).string();
    // The workload may swap the file for a symlink after the walk saw it.
    auto content = ReadRegularFileBeneath(dir, relative, kMaxOutputFileBytes);
    if (content) outputs[prefix + "/" + relative] = std::move(*content);
  });
  return outputs;
}

std::vector<std::string> UnsafeOutputs(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> unsafe;
  Walk(dir, [&](const fs::path& path, const fs::file_status& status) {
    std::string name = prefix + "/" + path.lexically_relative(dir).string();
    if (fs::is_symlink(status)) {
      unsafe.push_back(name + " is a symlink");
    } else if (!fs::is_regular_file(status) && !fs::is_directory(status)) {
      unsafe.push_back(name + " is a special file");
    } else {
      struct stat st{};
      if (lstat(path.c_str(), &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID)) != 0 && !S_ISDIR(st.st_mode)) {
        unsafe.push_back(fmt::format("{} is set{}id", name, (st.st_mode & S_ISUID) ? "u" : "g"));
      }
    }
  });
  return unsafe;
}

}  // namespace smolvm_check
