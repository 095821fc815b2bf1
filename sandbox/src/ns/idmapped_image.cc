#include "idmapped_image.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "unique_fd.h"

namespace smolbox::ns {
namespace {

// A user namespace with the sandbox's map, for the idmap alone: the sandbox's own does not
// exist yet when its image is mounted. Its process ends at once; the namespace lives on in
// the returned descriptor.
Expected<UniqueFd> UsernsWithMap(const confine::Identity& identity) {
  int hold[2];
  if (pipe2(hold, O_CLOEXEC) != 0) return std::unexpected(Error::Sys("pipe"));
  UniqueFd read_end(hold[0]), write_end(hold[1]);
  pid_t child = fork();
  if (child < 0) return std::unexpected(Error::Sys("fork"));
  if (child == 0) {
    if (unshare(CLONE_NEWUSER) != 0) _exit(1);
    (void)!write(write_end.get(), "u", 1);
    for (;;) pause();  // until the parent, done with it, kills it
  }
  write_end.Reset();
  char byte = 0;
  bool unshared = read(read_end.get(), &byte, 1) == 1;
  UniqueFd userns;
  auto mapped = unshared ? confine::WriteIdMaps(child, identity)
                         : std::unexpected(Error{"unshare a user namespace", "failed", 0});
  if (mapped)
    userns.Reset(open(fmt::format("/proc/{}/ns/user", child).c_str(), O_RDONLY | O_CLOEXEC));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  if (!mapped) return std::unexpected(mapped.error());
  if (!userns.valid()) return std::unexpected(Error::Sys("open the idmap's user namespace"));
  return userns;
}

// Top first: an overlay's upper layer, then its lower ones; else the directory itself.
std::vector<std::string> LayersOf(const std::string& image) {
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::vector<std::string> layers;
  for (std::string line; std::getline(mountinfo, line);) {
    std::istringstream fields(line);
    std::string id, parent, device, root, point;
    fields >> id >> parent >> device >> root >> point;
    size_t dash = line.find(" - overlay ");
    if (point != image || dash == std::string::npos) continue;
    std::string options = line.substr(line.find(' ', dash + 11) + 1);
    auto option = [&](const std::string& key) {
      size_t at = options.find(key + "=");
      if (at == std::string::npos) return std::string();
      size_t start = at + key.size() + 1;
      return options.substr(start, options.find(',', start) - start);
    };
    layers.clear();
    if (auto upper = option("upperdir"); !upper.empty()) layers.push_back(upper);
    std::istringstream lower(option("lowerdir"));
    for (std::string dir; std::getline(lower, dir, ':');) layers.push_back(dir);
  }
  if (layers.empty()) layers.push_back(image);
  return layers;
}

Expected<UniqueFd> IdmappedTree(const std::string& dir, int userns) {
  // The engine's own store (its layer links included), never a path the sandbox wrote.
  UniqueFd tree(open_tree(AT_FDCWD, dir.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
  if (!tree.valid()) return std::unexpected(Error::Sys("open_tree " + dir));
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY;
  attr.userns_fd = static_cast<uint64_t>(userns);
  if (mount_setattr(tree.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) != 0) {
    return std::unexpected(Error::Sys("idmap the image layer " + dir));
  }
  return tree;
}

}  // namespace

Expected<void> MountIdmappedImage(const std::string& image, const confine::Identity& identity,
                                  const std::string& target) {
  if (mkdir(target.c_str(), 0700) != 0) return std::unexpected(Error::Sys("mkdir " + target));
  SMOLBOX_ASSIGN_OR_RETURN(auto userns, UsernsWithMap(identity));
  std::vector<UniqueFd> trees;
  for (const std::string& layer : LayersOf(image)) {
    SMOLBOX_ASSIGN_OR_RETURN(auto tree, IdmappedTree(layer, userns.get()));
    trees.push_back(std::move(tree));
  }
  if (trees.size() == 1) {
    if (move_mount(trees[0].get(), "", AT_FDCWD, target.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0) {
      return std::unexpected(Error::Sys("mount the idmapped image at " + target));
    }
    return {};
  }
  // Overlayfs needs at least two lower layers to stack without an upper one.
  std::string lower;
  for (const auto& tree : trees)
    lower += fmt::format("{}/proc/self/fd/{}", lower.empty() ? "" : ":", tree.get());
  if (mount("overlay", target.c_str(), "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV,
            ("lowerdir=" + lower).c_str()) != 0) {
    return std::unexpected(Error::Sys("mount the image's idmapped layers at " + target));
  }
  return {};
}

}  // namespace smolbox::ns
