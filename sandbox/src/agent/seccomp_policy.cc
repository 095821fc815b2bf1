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
// those need. Denied is what neither needs and what has a record of kernel bugs or escapes.
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
};

// Denied where the architecture has them (x86_64 has no stime).
constexpr Denial kDeniedWhereTheyExist[] = {
    {"stime", EPERM},
};
// clang-format on

#if defined(__x86_64__)
// Newer than the libseccomp we build against, so given by number (arch/x86/entry/syscalls/
// syscall_64.tbl). A deny-list must keep up with the mount API, or it fails open.
constexpr int kNrOpenTreeAttr = 467;  // Linux 6.15: open_tree with mount attributes
#endif

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
  policy.DenyNumber(kNrOpenTreeAttr, "open_tree_attr", EPERM);
#endif
  DenyNamespaceClones(policy);
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
  auto program = CompileSeccompPolicy();
  if (!program) return std::unexpected(program.error());
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return std::unexpected(Error::Sys("prctl(PR_SET_NO_NEW_PRIVS)"));
  }
  if (int err = LoadSeccompProgram(*program); err != 0) {
    return std::unexpected(Error::Sys("seccomp(SECCOMP_SET_MODE_FILTER)", err));
  }
  return {};
}

}  // namespace smolbox::agent
