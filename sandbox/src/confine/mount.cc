#include "mount.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <optional>

#include <fmt/format.h>

#include "bounded_read.h"
#include "hidden_source.h"
#include "in_root.h"
#include "mutant.h"
#include "smolbox/spec.h"
#include "trust_store.h"

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

Expected<void> RemountBind(const std::string& target, bool read_only, unsigned long extra) {
  unsigned long flags = MS_REMOUNT | MS_BIND | extra | LockedFlags(target) | (read_only ? MS_RDONLY : 0);
  return Mount("none", target, nullptr, flags);
}

// At a target in a tree of our own making, where no path can lead elsewhere.
Expected<void> Bind(const std::string& source, const std::string& target, bool read_only,
                    unsigned long extra = MS_NOSUID | MS_NODEV) {
  SMOLBOX_TRY(Mount(source, target, nullptr, MS_BIND | MS_REC));
  return RemountBind(target, read_only, extra);
}

// At a path in the new root, resolved in it (in_root.h) and made when missing. The remount
// goes through the path again: the first descriptor names the entry beneath the new mount.
Expected<void> BindInRoot(int root_fd, const std::string& source, const std::string& path,
                          MakeMissing make, bool read_only, unsigned long extra = MS_NOSUID | MS_NODEV) {
  SMOLBOX_ASSIGN_OR_RETURN(auto point, OpenInRoot(root_fd, path, make));
  if (mount(source.c_str(), FdPath(point.get()).c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
    return std::unexpected(Error::Sys("bind " + path));
  }
  SMOLBOX_ASSIGN_OR_RETURN(auto mounted, OpenInRoot(root_fd, path, MakeMissing::kNothing));
  return RemountBind(FdPath(mounted.get()), read_only, extra);
}

// A new filesystem at a directory of the new root; the descriptor of the mount's own root is
// returned, so that what is made inside it is made there, not where the path led before.
Expected<UniqueFd> MountInRoot(int root_fd, const std::string& path, const char* type,
                               unsigned long flags, const std::string& data) {
  SMOLBOX_ASSIGN_OR_RETURN(auto point, OpenInRoot(root_fd, path, MakeMissing::kDirectories));
  if (mount(type, FdPath(point.get()).c_str(), type, flags, data.empty() ? nullptr : data.c_str()) != 0) {
    return std::unexpected(Error::Sys(fmt::format("mount {} on {}", type, path)));
  }
  return OpenInRoot(root_fd, path, MakeMissing::kNothing);
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

std::string ResolvConf(const std::string& resolver) { return fmt::format("nameserver {}\n", resolver); }

// mkdir -p of a relative path below a directory of the setup's own.
Expected<void> MakeDirs(const std::string& base, const std::string& relative) {
  for (size_t slash = relative.find('/'); ; slash = relative.find('/', slash + 1)) {
    std::string dir = base + "/" + relative.substr(0, slash);
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return std::unexpected(Error::Sys("mkdir " + dir));
    if (slash == std::string::npos) return {};
  }
}

// The first of a store's bundles (trust_store.h) that opens as a regular file, read within the
// bound; empty when there is none. at_fd and how resolve it: the host's /etc as it is, or an
// image's tree with RESOLVE_IN_ROOT, where its links lead into the image and never out.
Expected<std::string> ReadOwnBundle(int at_fd, const std::string& etc, bool in_root) {
  for (const char* bundle : kTrustBundles) {
    std::string path = etc + "/" + bundle;
    open_how how{};
    how.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    how.resolve = in_root ? RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV : 0;
    UniqueFd fd(static_cast<int>(syscall(SYS_openat2, at_fd, path.c_str(), &how, sizeof how)));
    struct stat st{};
    if (!fd.valid() || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    return ReadBounded(fd.get(), kMaxTrustBundleBytes, "the trust store's " + path);
  }
  return std::string();
}

Expected<void> WriteNewFile(int dir_fd, const char* name, const std::string& text, const std::string& what) {
  UniqueFd file(openat(dir_fd, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!file.valid()) return std::unexpected(Error::Sys("create " + what));
  for (size_t done = 0; done < text.size();) {
    ssize_t n = write(file.get(), text.data() + done, text.size() - done);
    if (n <= 0) return std::unexpected(Error::Sys("write " + what));
    done += static_cast<size_t>(n);
  }
  return {};
}

// etc/smolbox/ca-certificates.crt below dir_fd: the store's own bundle and the caller's.
Expected<void> PlaceCaBundle(int dir_fd, const std::string& own, const std::string& added) {
  if (mkdirat(dir_fd, "etc/smolbox", 0755) != 0) return std::unexpected(Error::Sys("mkdir /etc/smolbox"));
  return WriteNewFile(dir_fd, "etc/smolbox/ca-certificates.crt", JoinCaBundles(own, added), kSandboxCaBundle);
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
  if (!resolver.empty()) SMOLBOX_TRY(WriteFile(etc + "/resolv.conf", ResolvConf(resolver)));
  SMOLBOX_TRY(MirrorTrustStore("/etc", etc));
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

Expected<int> OpenPath(const std::string& path, int flags, const std::string& what) {
  int fd = open(path.c_str(), O_CLOEXEC | flags);
  if (fd < 0) return std::unexpected(Error::Sys(fmt::format("open {} {}", what, path)));
  return fd;
}

// With egress, an image's names go to the gateway's resolver too, and only there. The file is
// put in the writable layer before the overlay is mounted, where it hides the image's own
// resolv.conf (often a link into /run): the image's /etc belongs to ids the sandbox does not
// map, and could not be written through the overlay.
// The writable layer's /etc, with the image's own mode, for what the setup puts there.
Expected<void> MakeUpperEtc(int image_fd, int upper_fd, const std::string& why) {
  struct stat etc{};
  bool has_etc = fstatat(image_fd, "etc", &etc, AT_SYMLINK_NOFOLLOW) == 0;
  if (has_etc && !S_ISDIR(etc.st_mode)) {
    return std::unexpected(Error{"image", "its /etc is not a directory, and " + why, 0});
  }
  if (mkdirat(upper_fd, "etc", 0755) != 0 ||
      fchmodat(upper_fd, "etc", has_etc ? etc.st_mode & 07777 : 0755, 0) != 0) {
    return std::unexpected(Error::Sys("make /etc in the sandbox's writable layer"));
  }
  return {};
}

Expected<void> PlaceResolvConf(int upper_fd, const std::string& resolver) {
  return WriteNewFile(upper_fd, "etc/resolv.conf", ResolvConf(resolver), "the sandbox's /etc/resolv.conf");
}

// An engine's small files, written into the writable layer rather than bound from the host: they
// are the image's own files then, read-only with it, and no host path of the engine's shows in
// /proc/self/mountinfo. A directory on the way gets the image's mode where the image has one; it
// is made in the layer, which holds only what the setup made, so nothing there is a link.
Expected<void> PlaceRootFiles(int image_fd, int upper_fd, const std::map<std::string, std::string>& files) {
  if (files.size() > kMaxRootFiles) return std::unexpected(Error{"root files", "too many", 0});
  for (const auto& [path, content] : files) {
    if (!path.starts_with("/") || path.size() < 2 || content.size() > kMaxRootFileBytes) {
      return std::unexpected(Error{"root file", path + " is not an absolute path to a small file", 0});
    }
    std::string relative = path.substr(1);
    for (size_t slash = relative.find('/'); slash != std::string::npos; slash = relative.find('/', slash + 1)) {
      std::string dir = relative.substr(0, slash);
      struct stat st{};
      bool image_has_it = fstatat(image_fd, dir.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
      if (mkdirat(upper_fd, dir.c_str(), 0755) == 0) {
        if (fchmodat(upper_fd, dir.c_str(), image_has_it ? st.st_mode & 07777 : 0755, 0) != 0) {
          return std::unexpected(Error::Sys("chmod /" + dir + " in the sandbox's writable layer"));
        }
      } else if (errno != EEXIST) {
        return std::unexpected(Error::Sys("mkdir /" + dir + " in the sandbox's writable layer"));
      }
    }
    SMOLBOX_TRY(WriteNewFile(upper_fd, relative.c_str(), content, path));
  }
  return {};
}

// The tmpfs options of the sandbox's root: a megabyte for what setup writes there, with a
// caller's CA bundle room for the largest whole bundle it may write (the store's own and the
// caller's, each at its cap), and a writable root's own cap. The size only caps; the root is
// read-only once set up, unless it is writable.
std::string RootTmpfsOptions(const RootPlan& plan) {
  size_t bytes = (1 << 20) + (size_t(plan.writable_root_mib) << 20);
  if (!plan.ca_bundle.empty()) bytes += kMaxTrustBundleBytes + kMaxCaBundleBytes;
  for (const auto& file : plan.files) bytes += file.second.size();
  return fmt::format("size={},mode=0755", bytes);
}

// An image's root: one overlay, the image beneath a small writable layer that only the setup
// writes to (the mount points it makes, resolv.conf), made read-only before the workload
// starts. /proc/self/mountinfo shows it as "/" and nothing else of the image: its layers are
// named by /proc/self/fd paths, not by host paths. Without "userxattr" the overlay reads only
// trusted.* xattrs, which a user namespace cannot set, so nothing stored in the image can
// redirect or hide what the workload sees.
Expected<void> MountImageRoot(const RootPlan& plan) {
  if (auto in_the_way = MountsInTheWay(plan.image_fd, true)) {
    return std::unexpected(Error{"image", *in_the_way + ", and the sandbox's root holds only the "
                                 "image directory's own filesystem", 0});
  }
  const std::string& root = plan.newroot;
  // The writable layer's tmpfs lies under the overlay, at the same point: pivot_root takes the
  // overlay, and the tmpfs is detached with the host's root, still held by the overlay.
  SMOLBOX_TRY(Mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, RootTmpfsOptions(plan)));
  UniqueFd layers[2];
  const char* names[2] = {"upper", "work"};
  for (int i = 0; i < 2; ++i) {
    std::string dir = root + "/" + names[i];
    if (mkdir(dir.c_str(), 0755) != 0) return std::unexpected(Error::Sys("mkdir " + dir));
    SMOLBOX_ASSIGN_OR_RETURN(int fd, OpenPath(dir, O_PATH | O_DIRECTORY, "overlay layer"));
    layers[i].Reset(fd);
  }
  if (!plan.resolver.empty() || !plan.ca_bundle.empty()) {
    SMOLBOX_TRY(MakeUpperEtc(plan.image_fd, layers[0].get(),
                             plan.resolver.empty() ? "the CA bundle goes in /etc/smolbox"
                                                   : "with egress the sandbox's resolver is named in /etc/resolv.conf"));
  }
  if (!plan.resolver.empty()) SMOLBOX_TRY(PlaceResolvConf(layers[0].get(), plan.resolver));
  // The image keeps its own store; a caller's certificates join its bundle, read in the image.
  if (!plan.ca_bundle.empty()) {
    SMOLBOX_ASSIGN_OR_RETURN(auto own, ReadOwnBundle(plan.image_fd, "/etc", true));
    SMOLBOX_TRY(PlaceCaBundle(layers[0].get(), own, plan.ca_bundle));
  }
  SMOLBOX_TRY(PlaceRootFiles(plan.image_fd, layers[0].get(), plan.files));
  std::string options = fmt::format("lowerdir={},upperdir={},workdir={}", FdPath(plan.image_fd),
                                    FdPath(layers[0].get()), FdPath(layers[1].get()));
  return Mount("overlay", root, "overlay", MS_NOSUID | MS_NODEV | NoexecOf(plan.image_fd), options);
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

// The descriptor of the new /dev, a tmpfs of the setup's own.
Expected<UniqueFd> MakeDev(int root_fd) {
  if (!SMOLBOX_PROTECTED("minimal_dev")) {
    SMOLBOX_TRY(BindInRoot(root_fd, "/dev", "/dev", MakeMissing::kDirectories, false, MS_NOSUID));
    return OpenInRoot(root_fd, "/dev", MakeMissing::kNothing);
  }
  SMOLBOX_ASSIGN_OR_RETURN(auto mounted, MountInRoot(root_fd, "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755"));
  const std::string dev = FdPath(mounted.get());
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
  SMOLBOX_TRY(MakePts(dev));
  return mounted;
}

Expected<void> MaskProc(const std::string& proc, const std::string& dev) {
  if (!SMOLBOX_PROTECTED("proc_masks")) return {};
  for (const char* name : kProcMasked) {
    std::string path = proc + "/" + name;
    struct stat st{};
    if (lstat(path.c_str(), &st) != 0) continue;  // not in this kernel
    auto masked = S_ISDIR(st.st_mode)
                      ? Mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555")
                      : Bind(dev + "/null", path, true, MS_NOSUID | MS_NOEXEC);
    if (!masked) return masked;
  }
  for (const char* name : kProcReadOnly) {
    std::string path = proc + "/" + name;
    struct stat st{};
    if (lstat(path.c_str(), &st) != 0) continue;
    SMOLBOX_TRY(Bind(path, path, true, MS_NOSUID | MS_NODEV | MS_NOEXEC));
  }
  return {};
}

// After MakeDev: the masks are binds of its /dev/null.
Expected<void> MakeProc(int root_fd, const std::string& dev) {
  // A fresh procfs for the new pid namespace: only the sandbox's own processes are visible, and
  // of those, hidepid=invisible hides the ones of other uids (the agent, root inside) from a
  // workload that runs as another uid.
  const char* options = SMOLBOX_PROTECTED("hidepid") ? "hidepid=invisible" : "";
  SMOLBOX_ASSIGN_OR_RETURN(auto mounted, MountInRoot(root_fd, "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, options));
  return MaskProc(FdPath(mounted.get()), dev);
}

bool Covers(const std::string& outer, const std::string& inner) {
  return inner == outer || (inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 &&
                            inner[outer.size()] == '/');
}

Expected<void> MountStorage(const RootPlan& plan, int root_fd) {
  std::string storage = FdPath(plan.storage_fd);
  SMOLBOX_TRY(BindInRoot(root_fd, storage + "/tmp", "/tmp", MakeMissing::kDirectories, false));
  SMOLBOX_TRY(BindInRoot(root_fd, storage + "/shm", "/dev/shm", MakeMissing::kNothing, false));
  bool workdir_elsewhere = Covers("/tmp", plan.workdir);
  for (const auto& v : plan.volumes) workdir_elsewhere |= Covers(v.target, plan.workdir);
  if (workdir_elsewhere) return {};
  return BindInRoot(root_fd, storage + "/work", plan.workdir, MakeMissing::kDirectories, false);
}

// A ro file through the overlay of its directory: the staging mount is detached at once, so
// only the file's own name shows ("/data.csv /in/data.csv ro ... - overlay ..."), and only
// that file is reachable.
Expected<void> MountHiddenFile(std::optional<SourceHider>& hider, const RootPlan& plan,
                               const VolumeBind& v, int root_fd) {
  if (v.parent_fd < 0) return Unhidable("its directory could not be opened");
  std::string path = ResolvedPath(v.source_fd);
  std::string name = path.substr(path.rfind('/') + 1);
  struct stat opened{}, named{};
  bool same = fstat(v.source_fd, &opened) == 0 &&
              fstatat(v.parent_fd, name.c_str(), &named, AT_SYMLINK_NOFOLLOW) == 0 &&
              opened.st_dev == named.st_dev && opened.st_ino == named.st_ino;
  if (!same) return Unhidable("the file is no longer at the name it was opened by");
  SMOLBOX_ASSIGN_OR_RETURN(auto staged, StageHidden(hider, plan.newroot, v.parent_fd));
  auto bound = BindInRoot(root_fd, staged + "/" + name, v.target, MakeMissing::kFile, true);
  hider->Unstage();
  return bound;
}

// A ro volume through an overlay; an error says why it is to be bound as is instead.
Expected<void> MountHidden(std::optional<SourceHider>& hider, const RootPlan& plan,
                           const VolumeBind& v, bool is_dir, int root_fd) {
  if (auto in_the_way = MountsInTheWay(v.source_fd, is_dir)) return Unhidable(*in_the_way);
  if (!is_dir) return MountHiddenFile(hider, plan, v, root_fd);
  SMOLBOX_TRY(EnsureHider(hider, plan.newroot));
  SMOLBOX_ASSIGN_OR_RETURN(auto point, OpenInRoot(root_fd, v.target, MakeMissing::kDirectories));
  return hider->MountDirectory(v.source_fd, FdPath(point.get()));
}

Expected<void> MountVolumes(const RootPlan& plan, int root_fd) {
  std::optional<SourceHider> hider;  // made at the first ro volume, detached after the last
  for (const auto& v : plan.volumes) {
    bool is_dir = v.read_only ? IsDirectoryFd(v.source_fd) : true;
    if (v.read_only && !SMOLBOX_PROTECTED("ro_volume")) {
      SMOLBOX_TRY(BindInRoot(root_fd, FdPath(v.source_fd), v.target, is_dir ? MakeMissing::kDirectories : MakeMissing::kFile, false));
      continue;
    }
    if (v.read_only && plan.hide_host_paths) {
      auto hidden = MountHidden(hider, plan, v, is_dir, root_fd);
      if (hidden) continue;
      Warn(plan, Shows("volume " + v.target, hidden.error()));
    }
    std::string source = v.read_only ? FdPath(v.source_fd) : FdPath(plan.storage_fd) + "/" + v.storage_dir;
    SMOLBOX_TRY(BindInRoot(root_fd, source, v.target, is_dir ? MakeMissing::kDirectories : MakeMissing::kFile,
                           v.read_only));
  }
  return {};
}

// The directory a file was opened in, or -1.
int OpenDirectoryOf(int fd) {
  std::string path = ResolvedPath(fd);
  size_t slash = path.rfind('/');
  if (!path.starts_with('/') || slash == std::string::npos) return -1;
  std::string dir = slash == 0 ? "/" : path.substr(0, slash);
  return open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
}

Expected<void> CheckSameFile(const VolumeBind& v) {
  if (v.checked_fd < 0) return {};
  struct stat opened{}, checked{};
  if (fstat(v.source_fd, &opened) != 0 || fstat(v.checked_fd, &checked) != 0) {
    return std::unexpected(Error::Sys("fstat volume " + v.source));
  }
  if (opened.st_dev != checked.st_dev || opened.st_ino != checked.st_ino) {
    return std::unexpected(Error::Field("volume", fmt::format("{} is no longer the file it was when the run began", v.source)));
  }
  return {};
}

// A caller's certificates after the host's store: at kSandboxCaBundle, and over Debian's bundle,
// where OpenSSL's default file leads, so that a client that reads no variable takes them too.
Expected<void> AddCaBundle(const std::string& root, const std::string& added) {
  SMOLBOX_ASSIGN_OR_RETURN(int opened, OpenPath(root, O_PATH | O_DIRECTORY, "the sandbox's root"));
  UniqueFd root_fd(opened);
  SMOLBOX_ASSIGN_OR_RETURN(auto own, ReadOwnBundle(AT_FDCWD, "/etc", false));
  SMOLBOX_TRY(PlaceCaBundle(root_fd.get(), own, added));
  std::string debian = root + "/etc/" + kTrustBundles[0];
  struct stat st{};
  if (lstat(debian.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    SMOLBOX_TRY(Bind(root + kSandboxCaBundle, debian, true));
  }
  return {};
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
    SMOLBOX_TRY(CheckSameFile(v));
    // A file is hidden through an overlay of its directory, which may not be reachable once
    // the setup has left the runtime's ids. Without it the file is bound as is, with a warning.
    if (plan.hide_host_paths && !IsDirectoryFd(v.source_fd)) {
      v.parent_fd = OpenDirectoryOf(v.source_fd);
    }
  }
  return {};
}

std::string FdPath(int fd) { return fmt::format("/proc/self/fd/{}", fd); }

Expected<void> MirrorTrustStore(const std::string& from_etc, const std::string& to_etc) {
  for (std::string entry : kTrustStoreEntries) {
    std::string source = from_etc + "/" + entry;
    std::string target = to_etc + "/" + entry;
    struct stat st{};
    if (lstat(source.c_str(), &st) != 0) continue;
    size_t slash = entry.rfind('/');
    if (slash != std::string::npos) SMOLBOX_TRY(MakeDirs(to_etc, entry.substr(0, slash)));
    if (S_ISLNK(st.st_mode)) {
      char link[PATH_MAX];
      ssize_t n = readlink(source.c_str(), link, sizeof link - 1);
      if (n < 0) return std::unexpected(Error::Sys("readlink " + source));
      if (symlink(std::string(link, static_cast<size_t>(n)).c_str(), target.c_str()) != 0) {
        return std::unexpected(Error::Sys("symlink " + target));
      }
    } else if (S_ISDIR(st.st_mode)) {
      if (mkdir(target.c_str(), 0755) != 0) return std::unexpected(Error::Sys("mkdir " + target));
      SMOLBOX_TRY(Bind(source, target, true));
    } else if (S_ISREG(st.st_mode)) {
      SMOLBOX_TRY(MakeFile(target));
      SMOLBOX_TRY(Bind(source, target, true));
    }
  }
  return {};
}

Expected<void> BuildRoot(const RootPlan& plan) {
  const std::string& root = plan.newroot;
  if (plan.image_fd >= 0) {
    SMOLBOX_TRY(MountImageRoot(plan));
  } else {
    if (!plan.files.empty()) return std::unexpected(Error{"root file", "only an image's root takes files", 0});
    SMOLBOX_TRY(Mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, RootTmpfsOptions(plan)));
    SMOLBOX_TRY(MakeHostImage(root));
    SMOLBOX_TRY(MakeEtc(root, plan.uid, plan.gid, plan.resolver));
    if (!plan.ca_bundle.empty()) SMOLBOX_TRY(AddCaBundle(root, plan.ca_bundle));
  }
  SMOLBOX_ASSIGN_OR_RETURN(int opened_root, OpenPath(root, O_PATH | O_DIRECTORY, "the sandbox's root"));
  UniqueFd root_fd(opened_root);
  SMOLBOX_ASSIGN_OR_RETURN(auto dev_fd, MakeDev(root_fd.get()));
  const std::string dev = FdPath(dev_fd.get());
  SMOLBOX_TRY(MakeProc(root_fd.get(), dev));
  SMOLBOX_TRY(MountStorage(plan, root_fd.get()));
  SMOLBOX_TRY(MountVolumes(plan, root_fd.get()));
  // The skeleton itself becomes read-only; only the storage binds stay writable.
  if (!SMOLBOX_PROTECTED("ro_root")) return {};
  // The setup's own /dev tmpfs; the minimal_dev mutant's bind of the host's /dev stays as bound.
  if (SMOLBOX_PROTECTED("minimal_dev")) {
    SMOLBOX_TRY(Mount("none", dev, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC | LockedFlags(dev)));
  }
  // An OCI root that is not read-only takes writes; its upper layer holds them, capped.
  if (plan.writable_root_mib > 0 && plan.image_fd >= 0) return {};
  return Mount("none", root, nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV);
}

Expected<void> PivotInto(const std::string& newroot) {
  if (chdir(newroot.c_str()) != 0) return std::unexpected(Error::Sys("chdir " + newroot));
#ifdef SMOLBOX_MUTANTS
  // Its mutant: a chroot, which leaves the host's root mounted, and reachable, beneath.
  if (!SMOLBOX_PROTECTED("pivot_root")) {
    if (chroot(".") != 0 || chdir("/") != 0) return std::unexpected(Error::Sys("chroot " + newroot));
    return {};
  }
#endif
  // pivot_root(".", ".") stacks the old root on top of the new one; unmounting "." then
  // detaches the old root without needing a directory to park it in.
  if (syscall(SYS_pivot_root, ".", ".") != 0) return std::unexpected(Error::Sys("pivot_root"));
  if (umount2(".", MNT_DETACH) != 0) return std::unexpected(Error::Sys("umount2 old root"));
  if (chdir("/") != 0) return std::unexpected(Error::Sys("chdir /"));
  return {};
}

}  // namespace smolbox::confine
