// One case's place on the host: a fresh directory holding its mounts (with their planted
// files), the workdir of host-path sandboxes, and the canaries. Removed with the case.
//
// A mount with path_canary gets a directory named "NAME-<token>", the token fresh for the
// case; PathTokens() hands them to the canaries, which look for them in what the payload
// wrote.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "battery/catalog.h"

namespace smolvm_check {

class CaseDir {
 public:
  static Expected<CaseDir> Create(const std::string& work_root, const Case& c);
  CaseDir(CaseDir&& other) noexcept
      : root_(std::exchange(other.root_, {})), path_tokens_(std::move(other.path_tokens_)) {}
  CaseDir& operator=(CaseDir&&) = delete;
  ~CaseDir();

  const std::string& root() const { return root_; }
  std::string MountDir(const std::string& name) const;
  std::string Workdir() const { return root_ + "/work"; }
  std::string CanaryRoot() const { return root_ + "/canaries"; }
  // Canary name ("mount_path:NAME") -> the token in that mount's directory name.
  std::map<std::string, std::string> PathTokens() const;

 private:
  explicit CaseDir(std::string root) : root_(std::move(root)) {}
  std::string root_;
  std::map<std::string, std::string> path_tokens_;  // mount name -> token
};

// Regular files and directories below dir, with size and mtime, never following a symlink:
// the before/after picture of what a run changed.
std::map<std::string, std::string> Snapshot(const std::string& dir);
// The contents of the regular files below dir, keyed "prefix/relative/path"; each capped.
std::map<std::string, std::string> ReadOutputs(const std::string& dir, const std::string& prefix);

// What a consumer of the outputs must never be handed, below dir, keyed "prefix/relative/path":
// symlinks (a later reader follows them out of the directory), devices, FIFOs and sockets,
// and setuid or setgid files.
std::vector<std::string> UnsafeOutputs(const std::string& dir, const std::string& prefix);

// A fresh directory under /tmp for one invocation's case directories, open to every uid.
Expected<std::string> MakeWorkRoot();

}  // namespace smolvm_check
