#include "seccomp_policy.h"

#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <span>
#include <string>

#include "unique_fd.h"

namespace smolbox::agent {
namespace {

// A syscall the workload may not make at all, and the errno it gets instead.
struct Denial {
  const char* syscall;
  int errnum;
};

// The default is allow: the workload is arbitrary Python or Node, and nobody can list what
// those need. Denied is what neither needs and no peer lets an unprivileged workload reach:
// docker's default profile (moby/profiles seccomp/default.json, with docker's default
// capabilities) or gVisor, whose Sentry passes only ~100 syscalls of its own to the host
// (runsc/boot/filter/config) and answers the rest itself. The deliberate differences from
// those two are listed after the table.
// clang-format off
constexpr Denial kDenied[] = {
    // Kernel keyrings are shared across namespaces and a steady source of kernel bugs.
    {"keyctl", EPERM},
    {"add_key", EPERM},
    {"request_key", EPERM},
    // Large attack surfaces; userfaultfd turns kernel races into reliable exploits.
    {"bpf", EPERM},
    {"perf_event_open", EPERM},
    {"userfaultfd", EPERM},
    // Reaching into another process: the rest of the sandbox, or the agent itself.
    {"ptrace", EPERM},
    {"process_vm_readv", EPERM},
    {"process_vm_writev", EPERM},
    {"process_madvise", EPERM},
    {"pidfd_getfd", EPERM},
    // Loading kernels and modules.
    {"kexec_load", EPERM},
    {"kexec_file_load", EPERM},
    {"init_module", EPERM},
    {"finit_module", EPERM},
    {"delete_module", EPERM},
    // Mounts and namespaces: the workload's view of the filesystem is fixed by the host.
    {"mount", EPERM},
    {"umount2", EPERM},
    {"pivot_root", EPERM},
    {"chroot", EPERM},
    {"unshare", EPERM},
    {"setns", EPERM},
    {"fsopen", EPERM},
    {"fsconfig", EPERM},
    {"fsmount", EPERM},
    {"fspick", EPERM},
    {"move_mount", EPERM},
    {"open_tree", EPERM},
    {"mount_setattr", EPERM},
    // File handles bypass the mount namespace (the "shocker" container escape).
    {"open_by_handle_at", EPERM},
    {"name_to_handle_at", EPERM},
    // io_uring runs syscalls this filter never sees. ENOSYS, so libuv falls back to threads.
    {"io_uring_setup", ENOSYS},
    {"io_uring_enter", ENOSYS},
    {"io_uring_register", ENOSYS},
    // clone3 passes its flags in memory, which seccomp cannot read. ENOSYS makes glibc fall
    // back to clone, whose flags are filtered below.
    {"clone3", ENOSYS},
    // Administration of the host.
    {"swapon", EPERM},
    {"swapoff", EPERM},
    {"reboot", EPERM},
    {"acct", EPERM},
    {"quotactl", EPERM},
    {"quotactl_fd", EPERM},
    {"syslog", EPERM},
    {"lookup_dcookie", EPERM},
    {"uselib", EPERM},
    // The clock belongs to the host (the VM has its own, but one policy serves both).
    {"clock_settime", EPERM},
    {"clock_adjtime", EPERM},
    {"settimeofday", EPERM},
    {"adjtimex", EPERM},
    // Raw port I/O.
    {"iopl", EPERM},
    {"ioperm", EPERM},
    // The x86 local descriptor table: only 16-bit and 32-bit segment tricks (Wine, DOSEMU)
    // need it, and it has a record of kernel bugs (CVE-2015-3290, CVE-2017-17053). gVisor
    // refuses it with EPERM; docker allows it on x86, which is a difference listed below.
    {"modify_ldt", EPERM},
    // Obsolete interfaces to kernel tables, replaced by /proc and /sys long ago. _sysctl is
    // gone since Linux 5.5 but a deny-list must hold on older kernels too.
    {"_sysctl", EPERM},
    {"sysfs", EPERM},
    {"ustat", EPERM},
    // Gated by capabilities the workload never holds (it runs with none, even as root): the
    // kernel would refuse them anyway, and docker denies them unless the capability is added.
    {"sethostname", EPERM},    // CAP_SYS_ADMIN
    {"setdomainname", EPERM},  // CAP_SYS_ADMIN
    {"vhangup", EPERM},        // CAP_SYS_TTY_CONFIG
    // Comparing kernel objects of two processes tells their order in kernel memory; docker
    // wants CAP_SYS_PTRACE, and gVisor does not implement it.
    {"kcmp", EPERM},
    // fanotify watches whole filesystems; Python and Node watch files with inotify. Docker
    // wants CAP_SYS_ADMIN; gVisor does not implement it.
    {"fanotify_init", EPERM},
    // NUMA memory policy (CVE-2018-10675, a use-after-free in get_mempolicy). Docker wants
    // CAP_SYS_NICE, and libnuma reads EPERM as "no NUMA". migrate_pages and move_pages also
    // act on other processes.
    {"mbind", EPERM},
    {"set_mempolicy", EPERM},
    {"get_mempolicy", EPERM},
    {"set_mempolicy_home_node", EPERM},
    {"migrate_pages", EPERM},
    {"move_pages", EPERM},
};

// Denied where the architecture has them (x86_64 has no stime).
constexpr Denial kDeniedWhereTheyExist[] = {
    {"stime", EPERM},
};
// clang-format on

// Where this policy and the peers still differ, on purpose (x86_64, docker with its default
// capabilities):
//
// Denied here, allowed by docker:
// - ptrace, process_vm_readv, process_vm_writev (docker: on Linux 4.8 and later): the only
//   processes in reach are the rest of the workload and, in the vm backend, the agent.
// - name_to_handle_at: it makes the handles open_by_handle_at takes, and names mount ids.
// - adjtimex, clock_adjtime: docker allows them and leaves setting the clock to CAP_SYS_TIME;
//   whether a call reads or sets is in memory seccomp cannot see, and in the ns backend the
//   clock is the host's. Workloads read the time through clock_gettime.
// - chroot: docker keeps CAP_SYS_CHROOT by default; the workload here keeps no capability.
// - socket and socketpair of families other than unix, inet and inet6: docker denies only
//   AF_VSOCK. Netlink is out too, so getifaddrs() fails: Node's os.networkInterfaces() throws
//   and Python's socket.if_nameindex() raises PermissionError.
// - modify_ldt: docker allows it on x86 for 32-bit and 16-bit code. None runs here: the i386
//   ABI is killed (vm86 and vm86old with it), and gVisor refuses modify_ldt too.
// - personality(0xffffffff), the query (see DenyLayoutPersonas).
//
// Allowed here, denied by docker's default-deny:
// - create_module, get_kernel_syms, query_module, nfsservctl, getpmsg, putpmsg, afs_syscall,
//   tuxcall, security, vserver: no supported kernel has code behind them (nfsservctl went in
//   Linux 3.1, the others earlier or never existed), so they fail with ENOSYS for everyone.
// - whatever Linux adds after 6.18, until it is named here: a deny-list fails open where an
//   allow-list fails closed. The default stays allow because nobody can list every syscall
//   arbitrary Python or Node makes.
//
// gVisor lets no more than its own ~100 syscalls reach the host and implements the rest in
// the Sentry. Everything allowed here reaches a real kernel: the host's in the ns backend, the
// guest's in the vm backend. No table closes that difference; the README says so.

#if defined(__x86_64__)
// A syscall newer than the libseccomp we build against, given by number (arch/x86/entry/
// syscalls/syscall_64.tbl). A deny-list must keep up with the kernel, or it fails open.
struct NumberedDenial {
  int nr;
  const char* syscall;
  int errnum;
};

// ENOSYS where an older interface does the same and stays allowed: callers that try the new
// syscall first take the path they already have for older kernels.
// clang-format off
constexpr NumberedDenial kDeniedByNumber[] = {
    {467, "open_tree_attr", EPERM},        // Linux 6.15: open_tree with mount attributes
    // Linux 6.8: the LSM attributes of /proc/self/attr. Docker wants CAP_SYS_ADMIN; gVisor
    // does not implement them.
    {459, "lsm_get_self_attr", ENOSYS},
    {460, "lsm_set_self_attr", ENOSYS},
    {461, "lsm_list_modules", ENOSYS},
    // Linux 6.17: the FS_IOC_FSGETXATTR/FSSETXATTR ioctls as syscalls. Neither docker nor
    // gVisor has them yet.
    {468, "file_getattr", ENOSYS},
    {469, "file_setattr", ENOSYS},
};
// clang-format on
#endif

// Personas up to PER_LINUX32 | UNAME26 only change what uname reports. Every flag above them
// changes the memory layout or its protection: ADDR_NO_RANDOMIZE turns off ASLR,
// READ_IMPLIES_EXEC makes data executable, MMAP_PAGE_ZERO maps page zero (the way NULL
// dereferences in the kernel used to be exploited). Docker allows exactly 0, PER_LINUX32,
// UNAME26, both and the query 0xffffffff; gVisor refuses every layout flag with EINVAL.
constexpr uint64_t kHighestHarmlessPersona = 0x0020008;  // PER_LINUX32 | UNAME26

// A new namespace of any kind makes the workload root of something; a user namespace in
// particular hands it every capability there, the entry point of most unprivileged kernel
// exploits. CLONE_NEWTIME cannot be passed to clone(2): its bit is part of the exit signal.
constexpr uint64_t kCloneNamespaceFlags[] = {
    CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWPID,    CLONE_NEWNET,
    CLONE_NEWUTS,  CLONE_NEWIPC, CLONE_NEWCGROUP,
};

// Terminal ioctls that push keystrokes into a terminal another process reads.
constexpr uint64_t kTerminalInjectionIoctls[] = {TIOCSTI, TIOCLINUX};

// Socket families other than unix, IPv4 and IPv6 (netlink, packet, vsock, alg and the long,
// buggy tail). One rule cannot test an argument twice, so the complement of {1, 2, 10} is
// spelled as AF_UNSPEC, the values 3..9 and everything from 11 up.
static_assert(AF_UNSPEC == 0 && AF_UNIX == 1 && AF_INET == 2 && AF_INET6 == 10);
constexpr uint64_t kSocketFamiliesBetweenInetAndInet6[] = {3, 4, 5, 6, 7, 8, 9};

// Collects rules and keeps the first error, which Build() reports (after sandbox2's
// PolicyBuilder), so that the policy reads as a list rather than a chain of error checks.
class PolicyBuilder {
 public:
  PolicyBuilder() : ctx_(seccomp_init(SCMP_ACT_ALLOW)) {
    if (ctx_ == nullptr) error_ = Error{"seccomp_init", "libseccomp failed to initialise", 0};
  }
  ~PolicyBuilder() {
    if (ctx_ != nullptr) seccomp_release(ctx_);
  }
  PolicyBuilder(const PolicyBuilder&) = delete;
  PolicyBuilder& operator=(const PolicyBuilder&) = delete;

  // A syscall of any architecture but the native one kills the process: that covers i386
  // through `int 0x80`. It also covers the x32 ABI (x86_64 numbers with bit 30 set), which
  // shares x86_64's audit arch: libseccomp's x86_64 filter starts with `nr >= 0x40000000 ->
  // bad-arch action` unless SCMP_ARCH_X32 is added, which it never is here (checked in the
  // generated BPF; the agent tests run an x32 getpid to prove it).
  void KillForeignArchitectures() {
    Check(seccomp_attr_set(ctx_, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS),
          "seccomp_attr_set(SCMP_FLTATR_ACT_BADARCH)");
  }

  void Deny(const char* name, int errnum, std::span<const scmp_arg_cmp> conditions = {}) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) {
      Fail(Error{std::string("seccomp: ") + name, "unknown to libseccomp", 0});
      return;
    }
    DenyNumber(nr, name, errnum, conditions);
  }

  void DenyIfExists(const char* name, int errnum) {
    int nr = seccomp_syscall_resolve_name(name);
    // Negative numbers are libseccomp's placeholders for syscalls this arch lacks.
    if (nr >= 0) DenyNumber(nr, name, errnum, {});
  }

  void DenyNumber(int nr, const char* name, int errnum,
                  std::span<const scmp_arg_cmp> conditions = {}) {
    if (error_) return;
    Check(seccomp_rule_add_array(ctx_, SCMP_ACT_ERRNO(static_cast<uint32_t>(errnum)), nr,
                                 static_cast<unsigned>(conditions.size()), conditions.data()),
          std::string("seccomp_rule_add(") + name + ")");
  }

  Expected<SeccompProgram> Build();

 private:
  void Check(int rc, const std::string& step) {
    if (rc < 0) Fail(Error::Sys(step, -rc));
  }
  void Fail(Error error) {
    if (!error_) error_ = std::move(error);
  }

  scmp_filter_ctx ctx_;
  std::optional<Error> error_;
};

Expected<SeccompProgram> PolicyBuilder::Build() {
  if (error_) return std::unexpected(*error_);
  // libseccomp 2.5 exports only to an fd; a memfd keeps the program off the filesystem.
  UniqueFd memfd(memfd_create("smolbox-seccomp", MFD_CLOEXEC));
  if (!memfd.valid()) return std::unexpected(Error::Sys("memfd_create"));
  if (int rc = seccomp_export_bpf(ctx_, memfd.get()); rc < 0) {
    return std::unexpected(Error::Sys("seccomp_export_bpf", -rc));
  }
  struct stat st {};
  if (fstat(memfd.get(), &st) != 0) return std::unexpected(Error::Sys("fstat seccomp memfd"));
  auto size = static_cast<size_t>(st.st_size);
  if (size == 0 || size % sizeof(sock_filter) != 0 || size / sizeof(sock_filter) > BPF_MAXINSNS) {
    return std::unexpected(Error{"seccomp_export_bpf", "unexpected program size", 0});
  }
  SeccompProgram program;
  program.instructions.resize(size / sizeof(sock_filter));
  if (pread(memfd.get(), program.instructions.data(), size, 0) != static_cast<ssize_t>(size)) {
    return std::unexpected(Error::Sys("read seccomp memfd"));
  }
  return program;
}

void DenyNamespaceClones(PolicyBuilder& policy) {
  // One rule per flag: conditions within a rule are ANDed, rules are ORed.
  for (uint64_t flag : kCloneNamespaceFlags) {
    scmp_arg_cmp has_flag = SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag);
    policy.Deny("clone", EPERM, std::span(&has_flag, 1));
  }
}

void DenyTerminalInjection(PolicyBuilder& policy) {
  for (uint64_t request : kTerminalInjectionIoctls) {
    // The kernel reads the request as a 32-bit int: match the low half only, or setting a
    // high bit would slip past (the flatpak/snap TIOCSTI bypass).
    scmp_arg_cmp is_request = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffULL, request);
    policy.Deny("ioctl", EPERM, std::span(&is_request, 1));
  }
}

void DenyLayoutPersonas(PolicyBuilder& policy) {
  // One rule cannot test an argument twice, so the query (0xffffffff, above every flag) is
  // denied with them; only gdb and setarch ask, and both carry on without the answer. A
  // 64-bit compare also denies a persona with its (ignored) high bits set, which fails closed.
  scmp_arg_cmp has_layout_flag = SCMP_A0(SCMP_CMP_GT, kHighestHarmlessPersona);
  policy.Deny("personality", EPERM, std::span(&has_layout_flag, 1));
}

void DenyForeignSocketFamilies(PolicyBuilder& policy, const char* syscall) {
  // Full 64-bit compares: a family with high bits set is denied too, which fails closed.
  scmp_arg_cmp unspec = SCMP_A0(SCMP_CMP_EQ, AF_UNSPEC);
  policy.Deny(syscall, EPERM, std::span(&unspec, 1));
  for (uint64_t family : kSocketFamiliesBetweenInetAndInet6) {
    scmp_arg_cmp is_family = SCMP_A0(SCMP_CMP_EQ, family);
    policy.Deny(syscall, EPERM, std::span(&is_family, 1));
  }
  scmp_arg_cmp above_inet6 = SCMP_A0(SCMP_CMP_GE, AF_INET6 + 1);
  policy.Deny(syscall, EPERM, std::span(&above_inet6, 1));
}

}  // namespace

Expected<SeccompProgram> CompileSeccompPolicy() {
  PolicyBuilder policy;
  policy.KillForeignArchitectures();
  for (const Denial& denial : kDenied) policy.Deny(denial.syscall, denial.errnum);
  for (const Denial& denial : kDeniedWhereTheyExist) {
    policy.DenyIfExists(denial.syscall, denial.errnum);
  }
#if defined(__x86_64__)
  for (const NumberedDenial& denial : kDeniedByNumber) {
    policy.DenyNumber(denial.nr, denial.syscall, denial.errnum);
  }
#endif
  DenyNamespaceClones(policy);
  DenyLayoutPersonas(policy);
  DenyTerminalInjection(policy);
  DenyForeignSocketFamilies(policy, "socket");
  DenyForeignSocketFamilies(policy, "socketpair");
  return policy.Build();
}

int LoadSeccompProgram(const SeccompProgram& program) noexcept {
  sock_fprog fprog{};
  fprog.len = static_cast<unsigned short>(program.instructions.size());
  fprog.filter = const_cast<sock_filter*>(program.instructions.data());
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) != 0) return errno;
  return 0;
}

Expected<void> InstallSeccompPolicy() {
  SMOLBOX_ASSIGN_OR_RETURN(auto program, CompileSeccompPolicy());
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return std::unexpected(Error::Sys("prctl(PR_SET_NO_NEW_PRIVS)"));
  }
  if (int err = LoadSeccompProgram(program); err != 0) {
    return std::unexpected(Error::Sys("seccomp(SECCOMP_SET_MODE_FILTER)", err));
  }
  return {};
}

}  // namespace smolbox::agent
