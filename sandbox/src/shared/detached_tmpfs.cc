// Storage::CreateDetachedTmpfs: the rootless vm backend's quota-bound storage.
//
// Only root may loop-mount a disk, but any user may mount a tmpfs in a user namespace of its own.
// A child makes one, mounts the tmpfs there, sends back a descriptor to its root and exits; with
// it go its namespaces and the mount. The filesystem lives on, detached, for as long as a
// descriptor to it is open: the runtime's, and QEMU's, which serves it to the guest. No path on
// the host leads to it, so nothing else can reach it, and a killed runtime leaves nothing.
#include "storage.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "fd_passing.h"

namespace smolbox::shared {
namespace {

// What the child reports: the step that failed, with its errno, or an empty step and the
// descriptor.
struct MountReport {
  char failed_step[64];
  int err;
};

// Everything the child needs, formatted before the fork: the child of a threaded runtime
// allocates nothing.
struct MountPlan {
  std::string mountpoint;
  std::string options;
  std::string uid_map;
  std::string gid_map;
  bool user_xattrs = false;
};

bool WriteProcSelf(const char* file, const std::string& text) {
  int fd = open(file, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
}

[[noreturn]] void Fail(int socket, const char* step) {
  MountReport report{};
  report.err = errno;
  strncpy(report.failed_step, step, sizeof report.failed_step - 1);
  SendBytesWithFd(socket, &report, sizeof report, -1);
  _exit(1);
}

[[noreturn]] void MountInOwnNamespace(int socket, const MountPlan& plan) {
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) Fail(socket, "unshare a user and a mount namespace");
  // Root of the new namespace is this user, and no one else is mapped.
  if (!WriteProcSelf("/proc/self/setgroups", "deny")) Fail(socket, "write /proc/self/setgroups");
  if (!WriteProcSelf("/proc/self/uid_map", plan.uid_map)) Fail(socket, "write /proc/self/uid_map");
  if (!WriteProcSelf("/proc/self/gid_map", plan.gid_map)) Fail(socket, "write /proc/self/gid_map");
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) Fail(socket, "mount --make-rprivate /");
  if (mount("tmpfs", plan.mountpoint.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, plan.options.c_str()) != 0) {
    Fail(socket, "mount the tmpfs");
  }
  int root = open(plan.mountpoint.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root < 0) Fail(socket, "open the tmpfs");
  if (plan.user_xattrs) {
    if (fsetxattr(root, "user.smolbox.probe", "1", 1, 0) != 0) {
      Fail(socket, "set a user.* xattr on tmpfs, which needs Linux 6.6 or later");
    }
    fremovexattr(root, "user.smolbox.probe");
  }
  MountReport success{};
  SendBytesWithFd(socket, &success, sizeof success, root);
  _exit(0);
}

// The child's report, and the descriptor that came with a success.
Expected<UniqueFd> Receive(int socket) {
  MountReport report{};
  iovec iov{&report, sizeof report};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))]{};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  UniqueFd root;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int))) {
      int fd = -1;
      memcpy(&fd, CMSG_DATA(c), sizeof fd);
      root.Reset(fd);
    }
  }
  if (n != static_cast<ssize_t>(sizeof report)) {
    return std::unexpected(Error{"storage", "the child that mounts the tmpfs died before it reported", 0});
  }
  report.failed_step[sizeof report.failed_step - 1] = '\0';
  if (report.failed_step[0] != '\0') {
    return std::unexpected(Error{fmt::format("rootless storage: {}", report.failed_step), strerror(report.err), report.err});
  }
  if (!root.valid()) return std::unexpected(Error{"storage", "the child reported a tmpfs but sent no descriptor", 0});
  return root;
}

}  // namespace

Expected<Storage> Storage::CreateDetachedTmpfs(int64_t size_mib, const std::string& mountpoint, bool user_xattrs) {
  // uid=0 and gid=0 in the child's namespace: this user on the host.
  MountPlan plan{mountpoint, TmpfsStorageOptions(size_mib, 0, 0), fmt::format("0 {} 1\n", geteuid()),
                 fmt::format("0 {} 1\n", getegid()), user_xattrs};
  if (mkdir(mountpoint.c_str(), 0700) != 0) return std::unexpected(Error::Sys("mkdir " + mountpoint));
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    rmdir(mountpoint.c_str());
    return std::unexpected(Error::Sys("socketpair"));
  }
  UniqueFd ours(pair[0]), theirs(pair[1]);
  pid_t pid = fork();
  if (pid == 0) MountInOwnNamespace(theirs.get(), plan);
  theirs.Reset();
  auto root = pid < 0 ? std::unexpected(Error::Sys("fork")) : Receive(ours.get());
  if (pid > 0) {
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  // The mount went with the child's namespace: on the host this is an empty directory.
  rmdir(mountpoint.c_str());
  if (!root) return std::unexpected(root.error());
  return Adopt(std::move(*root));
}

}  // namespace smolbox::shared
