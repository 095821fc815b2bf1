// Read-only host sources mounted so that the sandbox's /proc/self/mountinfo does not name them.
//
// A bind mount's mountinfo line carries the path of its source inside the source's
// filesystem ("/home/alice/project /in ro ..."), and no mount option changes that: the
// workload would learn the host's user and project names. A read-only overlayfs whose lower
// layers are given as /proc/self/fd/N paths shows "/" as its root and those fd paths as its
// options instead. It needs no privilege beyond the user namespace's (Linux 5.11).
//
//   auto hider = SourceHider::Create(newroot);           // in a root that is still writable
//   if (!hider) { ...bind instead, and warn... }
//   hider->MountDirectory(dir_fd, newroot + "/in");      // "/ /in ro ... - overlay overlay"
//   auto staged = hider->Stage(parent_fd);               // for a file, or entries of a tree:
//   ...bind *staged + "/data.csv" onto its target...     // "/data.csv /in.csv ro ..."
//   hider->Unstage();
//   // destroyed: its empty layer and staging point are detached; the mounts made stay
#pragma once

#include <optional>
#include <string>

#include "smolbox/error.h"
#include "unique_fd.h"

namespace smolbox::confine {

class SourceHider {
 public:
  // Makes, under root, an empty read-only tmpfs and a staging directory. Both are removed by
  // the destructor, so root must stay writable until then.
  static Expected<SourceHider> Create(const std::string& root);
  SourceHider(SourceHider&& other) noexcept;
  SourceHider& operator=(SourceHider&&) = delete;
  ~SourceHider();

  // A read-only overlay of the directory dir_fd at target.
  Expected<void> MountDirectory(int dir_fd, const std::string& target) const;
  // The same overlay at the staging point, whose path is returned: entries bound from there
  // show their path inside dir_fd's tree and nothing above it. Unstage detaches it.
  Expected<std::string> Stage(int dir_fd);
  void Unstage();

 private:
  SourceHider(std::string empty_point, std::string stage_point, UniqueFd empty)
      : empty_point_(std::move(empty_point)),
        stage_point_(std::move(stage_point)),
        empty_(std::move(empty)) {}

  std::string empty_point_;  // where the empty tmpfs is mounted until destruction
  std::string stage_point_;
  UniqueFd empty_;  // the empty tmpfs: overlay wants two lower layers without an upper
  bool staged_ = false;
};

// Why fd's source cannot be hidden behind an overlay, or nothing. Overlayfs sees only the
// source's own filesystem: a mount below a directory, or over a file, would drop out of view,
// where a recursive bind shows it.
std::optional<std::string> MountsInTheWay(int fd, bool is_dir);

// MS_NOEXEC when fd's source is on a noexec mount, else 0. An overlay of it must carry the flag
// too: exec checks the mount a file is reached through, which is the overlay, not the source's.
unsigned long NoexecOf(int fd);

// The path fd was opened at, as /proc/self/fd shows it.
std::string ResolvedPath(int fd);

}  // namespace smolbox::confine
