#include "mount.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "hidden_source.h"

namespace smolbox::confine {
namespace {

constexpr const char* kHostImageDirs[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};
constexpr const char* kDevices[] = {"null", "zero", "full", "random", "urandom"};
// What runc and docker mask in every container's /proc: kernel memory and the kernel's keys,
// timers and scheduler internals, which tell about everything else the kernel runs. Files
// read as /dev/null, directories as an empty read-only tmpfs.
constexpr const char* kProcMasked[] = {"kcore", "keys", "timer_list", "timer_stats", "sched_debug",
                                       "latency_stats", "acpi", "asound", "scsi"};
// And what they make read-only: the kernel's knobs. /proc/sys stays readable (boot_id, limits)
// but not writable, not even the sysctls of the sandbox's own network namespace. Beyond runc:
// /proc/pressure, whose files take a PSI trigger (a kernel timer per open file) from anyone;
// reading the pressure still works.
constexpr const char* kProcReadOnly[] = {"sys", "sysrq-trigger", "irq", "bus", "fs", "pressure"};

Expected<void> Mount(const std::string& source, const std::string& target, const char* type,
                     unsigned long flags, const std::string& data = "") {
  if (mount(source.c_str(), target.c_str(), type, flags, data.empty() ? nullptr : data.c_str()) != 0) {
    return std::unexpected(Error::Sys(fmt::format("mount {} on {} ({})", source, target, type ? type : "bind")));
  }
  return {};
}

// Creates each missing component of path; the tree is ours and fresh, so nothing in it can be
// a planted symlink, but mkdir on a read-only image path is reported, not ignored.
Expected<void> MakeDirs(const std::string& path) {
  for (size_t pos = 1; pos != std::string::npos;) {
    pos = path.find('/', pos + 1);
    std::string prefix = path.substr(0, pos);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return std::unexpected(Error::Sys("mkdir " + prefix));
    }
  }
  return {};
}

Expected<void> MakeFile(const std::string& path) {
  int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return std::unexpected(Error::Sys("create mountpoint " + path));
  close(fd);
  return {};
}

// A remount of a bind in a user namespace must keep the flags the kernel locked on the
// original mount (nosuid, nodev, noexec, atime), or it fails with EPERM.
unsigned long LockedFlags(const std::string& path) {
  struct statvfs st{};
  if (statvfs(path.c_str(), &st) != 0) return 0;
  unsigned long flags = 0;
  if (st.f_flag & ST_NOSUID) flags |= MS_NOSUID;
  if (st.f_flag & ST_NODEV) flags |= MS_NODEV;
  if (st.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
  if (st.f_flag & ST_NOATIME) flags |= MS_NOATIME;
  if (st.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
  if (st.f_flag & ST_RELATIME) flags |= MS_RELATIME;
  return flags;
}

Expected<void> Bind(const std::string& source, const std::string& target, bool read_only,
                    unsigned long extra = MS_NOSUID | MS_NODEV) {
  SMOLBOX_TRY(Mount(source, target, nullptr, MS_BIND | MS_REC));
  unsigned long flags = MS_REMOUNT | MS_BIND | extra | LockedFlags(target) | (read_only ? MS_RDONLY : 0);
  return Mount("none", target, nullptr, flags);
}

bool IsDirectoryFd(int fd) {
  struct stat st{};
  return fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
}

Expected<void> WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out.flush()) return std::unexpected(Error::Sys("write " + path));
  return {};
}

// Only what programs need to name the sandbox user; no host account or secret.
Expected<void> MakeEtc(const std::string& root, uid_t uid, gid_t gid, const std::string& resolver) {
  std::string etc = root + "/etc";
  if (mkdir(etc.c_str(), 0755) != 0) return std::unexpected(Error::Sys("mkdir " + etc));
  std::string passwd = "root:x:0:0:root:/root:/bin/sh\n";
  std::string group = "root:x:0:\n";
  if (uid != 0) passwd += fmt::format("sandbox:x:{}:{}:sandbox:/work:/bin/sh\n", uid, gid);
  if (gid != 0) group += fmt::format("sandbox:x:{}:\n", gid);
  passwd += "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
  group += "nogroup:x:65534:\n";
  for (auto [name, text] : {std::pair<const char*, std::string>{"passwd", passwd},
                            {"group", group},
                            {"hosts", "127.0.0.1 localhost sandbox\n::1 localhost\n"},
                            {"hostname", "sandbox\n"},
                            {"nsswitch.conf", resolver.empty() ? "passwd: files\ngroup: files\nhosts: files\n"
                                                               : "passwd: files\ngroup: files\nhosts: files dns\n"}}) {
    SMOLBOX_TRY(WriteFile(etc + "/" + name, text));
  }
  // With egress, names go to the gateway's resolver, and only there.
  if (!resolver.empty()) SMOLBOX_TRY(WriteFile(etc + "/resolv.conf", fmt::format("nameserver {}\n", resolver)));
  // The loader cache only lists library paths; with it, lookups match the host's.
  if (access("/etc/ld.so.cache", R_OK) == 0) {
    SMOLBOX_TRY(MakeFile(etc + "/ld.so.cache"));
    SMOLBOX_TRY(Bind("/etc/ld.so.cache", etc + "/ld.so.cache", true));
  }
  return {};
}

Expected<void> MakeHostImage(const std::string& root) {
  for (const char* dir : kHostImageDirs) {
    struct stat st{};
    if (lstat(dir, &st) != 0) continue;
    std::string target = root + dir;
    if (S_ISLNK(st.st_mode)) {
      // Merged /usr: /bin -> usr/bin. Recreate the link; it resolves inside the new root.
      char link[PATH_MAX];
      ssize_t n = readlink(dir, link, sizeof link - 1);
      if (n < 0) return std::unexpected(Error::Sys(fmt::format("readlink {}", dir)));
      if (symlink(std::string(link, n).c_str(), target.c_str()) != 0) {
        return std::unexpected(Error::Sys("symlink " + target));
      }
      continue;
    }
    if (!S_ISDIR(st.st_mode)) continue;
    if (mkdir(target.c_str(), 0755) != 0) return std::unexpected(Error::Sys("mkdir " + target));
    SMOLBOX_TRY(Bind(dir, target, true));
  }
  return {};
}

void Warn(const RootPlan& plan, std::string text) {
  if (plan.warnings != nullptr) plan.warnings->push_back(std::move(text));
}

std::string Shows(const std::string& what, const Error& why) {
  return fmt::format("{}: bound as is, so /proc/self/mountinfo in the sandbox shows its host path "
                     "({})", what, why.ToString());
}

std::unexpected<Error> Unhidable(std::string why) {
  return std::unexpected(Error{"overlay", std::move(why), 0});
}

Expected<void> EnsureHider(std::optional<SourceHider>& hider, const std::string& root) {
  if (hider) return {};
  SMOLBOX_ASSIGN_OR_RETURN(auto made, SourceHider::Create(root));
  hider.emplace(std::move(made));
  return {};
}

Expected<std::string> StageHidden(std::optional<SourceHider>& hider, const std::string& root,
                                  int dir_fd) {
  SMOLBOX_TRY(EnsureHider(hider, root));
  return hider->Stage(dir_fd);
}

Expected<std::string> StageImage(const RootPlan& plan, std::optional<SourceHider>& hider) {
  if (auto in_the_way = MountsInTheWay(plan.image_fd, true)) return Unhidable(*in_the_way);
  return StageHidden(hider, plan.newroot, plan.image_fd);
}

// Where the image's entries are bound from: an overlay of the whole image, so that each shows
// as "/usr", or the image itself where that cannot be.
std::string ImageSource(const RootPlan& plan, std::optional<SourceHider>& hider) {
  if (!plan.hide_host_paths) return FdPath(plan.image_fd);
  auto staged = StageImage(plan, hider);
  if (staged) return *staged;
  Warn(plan, Shows("image", staged.error()));
  return FdPath(plan.image_fd);
}

// A rootfs directory: each top-level entry bound read-only, except the trees we provide.
Expected<void> MakeDirImage(const RootPlan& plan) {
  const std::string& root = plan.newroot;
  const int image_fd = plan.image_fd;
  int fd = dup(image_fd);
  DIR* dir = fd >= 0 ? fdopendir(fd) : nullptr;
  if (!dir) return std::unexpected(Error::Sys("open image directory"));
  std::unique_ptr<DIR, int (*)(DIR*)> closer(dir, closedir);
  std::optional<SourceHider> hider;  // detached once every entry is bound
  const std::string image = ImageSource(plan, hider);
  while (dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name == "." || name == ".." || name == "proc" || name == "dev" || name == "sys" || name == "tmp") continue;
    struct stat st{};
    if (fstatat(image_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    std::string target = root + "/" + name;
    if (S_ISLNK(st.st_mode)) {
      char link[PATH_MAX];
      ssize_t n = readlinkat(image_fd, name.c_str(), link, sizeof link - 1);
      if (n < 0 || symlink(std::string(link, n).c_str(), target.c_str()) != 0) {
        return std::unexpected(Error::Sys("copy image symlink /" + name));
      }
      continue;
    }
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) continue;
    auto made = S_ISDIR(st.st_mode) ? MakeDirs(target) : MakeFile(target);
    if (!made) return made;
    SMOLBOX_TRY(Bind(image + "/" + name, target, true));
  }
  return {};
}

// Terminals of the sandbox's own, as docker and bwrap give: a new devpts instance, never the
// host's, so openpty(), pty.spawn and pexpect work and no pty of the host is reachable. No gid=
// option: a rootless sandbox maps no tty group.
Expected<void> MakePts(const std::string& dev) {
  std::string pts = dev + "/pts";
  if (mkdir(pts.c_str(), 0755) != 0) return std::unexpected(Error::Sys("mkdir " + pts));
  SMOLBOX_TRY(Mount("devpts", pts, "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"));
  if (symlink("pts/ptmx", (dev + "/ptmx").c_str()) != 0) return std::unexpected(Error::Sys("symlink /dev/ptmx"));
  return {};
}

Expected<void> MakeDev(const std::string& root) {
  std::string dev = root + "/dev";
  if (mkdir(dev.c_str(), 0755) != 0) return std::unexpected(Error::Sys("mkdir " + dev));
  SMOLBOX_TRY(Mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755"));
  for (const char* name : kDevices) {
    std::string target = dev + "/" + name;
    SMOLBOX_TRY(MakeFile(target));
    // Device nodes cannot be created in a user namespace; bind the host's harmless ones.
    SMOLBOX_TRY(Bind(std::string("/dev/") + name, target, false, MS_NOSUID | MS_NOEXEC));
  }
  for (auto [name, to] : {std::pair{"fd", "/proc/self/fd"}, {"stdin", "/proc/self/fd/0"},
                          {"stdout", "/proc/self/fd/1"}, {"stderr", "/proc/self/fd/2"}}) {
    if (symlink(to, (dev + "/" + name).c_str()) != 0) return std::unexpected(Error::Sys("symlink /dev/" + std::string(name)));
  }
  if (mkdir((dev + "/shm").c_str(), 01777) != 0) return std::unexpected(Error::Sys("mkdir /dev/shm"));
  return MakePts(dev);
}

Expected<void> MaskProc(const std::string& root) {
  for (const char* name : kProcMasked) {
    std::string path = fmt::format("{}/proc/{}", root, name);
    struct stat st{};
    if (lstat(path.c_str(), &st) != 0) continue;  // not in this kernel
    auto masked = S_ISDIR(st.st_mode)
                      ? Mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555")
                      : Bind(root + "/dev/null", path, true, MS_NOSUID | MS_NOEXEC);
    if (!masked) return masked;
  }
  for (const char* name : kProcReadOnly) {
    std::string path = fmt::format("{}/proc/{}", root, name);
    struct stat st{};
    if (lstat(path.c_str(), &st) != 0) continue;
    SMOLBOX_TRY(Bind(path, path, true, MS_NOSUID | MS_NODEV | MS_NOEXEC));
  }
  return {};
}

// After MakeDev: the masks are binds of its /dev/null.
Expected<void> MakeProc(const std::string& root, const std::string& options) {
  std::string proc = root + "/proc";
  if (mkdir(proc.c_str(), 0555) != 0) return std::unexpected(Error::Sys("mkdir " + proc));
  // A fresh procfs for the new pid namespace: only the sandbox's own processes are visible.
  SMOLBOX_TRY(Mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, options));
  return MaskProc(root);
}

bool Covers(const std::string& outer, const std::string& inner) {
  return inner == outer || (inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 &&
                            inner[outer.size()] == '/');
}

Expected<void> MountStorage(const RootPlan& plan) {
  std::string storage = FdPath(plan.storage_fd);
  const std::string& root = plan.newroot;
  SMOLBOX_TRY(MakeDirs(root + "/tmp"));
  SMOLBOX_TRY(Bind(storage + "/tmp", root + "/tmp", false));
  SMOLBOX_TRY(Bind(storage + "/shm", root + "/dev/shm", false));
  bool workdir_elsewhere = Covers("/tmp", plan.workdir);
  for (const auto& v : plan.volumes) workdir_elsewhere |= Covers(v.target, plan.workdir);
  if (workdir_elsewhere) return {};
  SMOLBOX_TRY(MakeDirs(root + plan.workdir));
  return Bind(storage + "/work", root + plan.workdir, false);
}

// A ro file through the overlay of its directory: the staging mount is detached at once, so
// only the file's own name shows ("/data.csv /in/data.csv ro ... - overlay ..."), and only
// that file is reachable.
Expected<void> MountHiddenFile(std::optional<SourceHider>& hider, const RootPlan& plan,
                               const VolumeBind& v, const std::string& target) {
  if (v.parent_fd < 0) return Unhidable("its directory could not be opened");
  std::string path = ResolvedPath(v.source_fd);
  std::string name = path.substr(path.rfind('/') + 1);
  struct stat opened{}, named{};
  bool same = fstat(v.source_fd, &opened) == 0 &&
              fstatat(v.parent_fd, name.c_str(), &named, AT_SYMLINK_NOFOLLOW) == 0 &&
              opened.st_dev == named.st_dev && opened.st_ino == named.st_ino;
  if (!same) return Unhidable("the file is no longer at the name it was opened by");
  SMOLBOX_ASSIGN_OR_RETURN(auto staged, StageHidden(hider, plan.newroot, v.parent_fd));
  auto bound = Bind(staged + "/" + name, target, true);
  hider->Unstage();
  return bound;
}

// A ro volume through an overlay; an error says why it is to be bound as is instead.
Expected<void> MountHidden(std::optional<SourceHider>& hider, const RootPlan& plan,
                           const VolumeBind& v, bool is_dir, const std::string& target) {
  if (auto in_the_way = MountsInTheWay(v.source_fd, is_dir)) return Unhidable(*in_the_way);
  if (!is_dir) return MountHiddenFile(hider, plan, v, target);
  SMOLBOX_TRY(EnsureHider(hider, plan.newroot));
  return hider->MountDirectory(v.source_fd, target);
}

Expected<void> MountVolumes(const RootPlan& plan) {
  std::optional<SourceHider> hider;  // made at the first ro volume, detached after the last
  for (const auto& v : plan.volumes) {
    std::string target = plan.newroot + v.target;
    bool is_dir = v.read_only ? IsDirectoryFd(v.source_fd) : true;
    std::string parent = target.substr(0, target.rfind('/'));
    SMOLBOX_TRY(MakeDirs(is_dir ? target : parent));
    if (!is_dir) {
      SMOLBOX_TRY(MakeFile(target));
    }
    if (v.read_only && plan.hide_host_paths) {
      auto hidden = MountHidden(hider, plan, v, is_dir, target);
      if (hidden) continue;
      Warn(plan, Shows("volume " + v.target, hidden.error()));
    }
    std::string source = v.read_only ? FdPath(v.source_fd) : FdPath(plan.storage_fd) + "/" + v.storage_dir;
    SMOLBOX_TRY(Bind(source, target, v.read_only));
  }
  return {};
}

Expected<int> OpenPath(const std::string& path, int flags, const std::string& what) {
  int fd = open(path.c_str(), O_CLOEXEC | flags);
  if (fd < 0) return std::unexpected(Error::Sys(fmt::format("open {} {}", what, path)));
  return fd;
}

// The directory a file was opened in, or -1.
int OpenDirectoryOf(int fd) {
  std::string path = ResolvedPath(fd);
  size_t slash = path.rfind('/');
  if (!path.starts_with('/') || slash == std::string::npos) return -1;
  std::string dir = slash == 0 ? "/" : path.substr(0, slash);
  return open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
}

}  // namespace

Expected<void> OpenSources(RootPlan& plan) {
  if (!plan.image.empty()) {
    // Readable, not O_PATH: its entries are listed to assemble the root.
    SMOLBOX_ASSIGN_OR_RETURN(auto fd, OpenPath(plan.image, O_RDONLY | O_DIRECTORY, "image"));
    plan.image_fd = fd;
  }
  if (!plan.storage.empty()) {
    SMOLBOX_ASSIGN_OR_RETURN(auto fd, OpenPath(plan.storage, O_PATH | O_DIRECTORY | O_NOFOLLOW, "storage"));
    plan.storage_fd = fd;
  }
  for (auto& v : plan.volumes) {
    if (!v.read_only) continue;
    SMOLBOX_ASSIGN_OR_RETURN(auto fd, OpenPath(v.source, O_PATH, "volume"));
    v.source_fd = fd;
    // A file is hidden through an overlay of its directory, which may not be reachable once
    // the setup has left the runtime's ids. Without it the file is bound as is, with a warning.
    if (plan.hide_host_paths && !IsDirectoryFd(v.source_fd)) {
      v.parent_fd = OpenDirectoryOf(v.source_fd);
    }
  }
  return {};
}

std::string FdPath(int fd) { return fmt::format("/proc/self/fd/{}", fd); }

Expected<void> BuildRoot(const RootPlan& plan) {
  const std::string& root = plan.newroot;
  SMOLBOX_TRY(Mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755"));
  if (plan.image_fd >= 0) {
    SMOLBOX_TRY(MakeDirImage(plan));
  } else {
    SMOLBOX_TRY(MakeHostImage(root));
    SMOLBOX_TRY(MakeEtc(root, plan.uid, plan.gid, plan.resolver));
  }
  SMOLBOX_TRY(MakeDev(root));
  SMOLBOX_TRY(MakeProc(root, plan.proc_options));
  SMOLBOX_TRY(MountStorage(plan));
  SMOLBOX_TRY(MountVolumes(plan));
  // The skeleton itself becomes read-only; only the storage binds stay writable.
  SMOLBOX_TRY(Mount("none", root + "/dev", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC | LockedFlags(root + "/dev")));
  return Mount("none", root, nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV);
}

Expected<void> PivotInto(const std::string& newroot) {
  if (chdir(newroot.c_str()) != 0) return std::unexpected(Error::Sys("chdir " + newroot));
  // pivot_root(".", ".") stacks the old root on top of the new one; unmounting "." then
  // detaches the old root without needing a directory to park it in.
  if (syscall(SYS_pivot_root, ".", ".") != 0) return std::unexpected(Error::Sys("pivot_root"));
  if (umount2(".", MNT_DETACH) != 0) return std::unexpected(Error::Sys("umount2 old root"));
  if (chdir("/") != 0) return std::unexpected(Error::Sys("chdir /"));
  return {};
}

}  // namespace smolbox::confine
