// syscall_probe: attempts one syscall per case named on the command line, with raw syscall()
// so that no libc wrapper second-guesses it, and prints one line per case:
//
//   $ syscall_probe keyctl socket_packet
//   keyctl: errno=EPERM
//   socket_packet: ok
//
// It exits 0 unless a case is unknown (2). The x32 and int80 cases are meant to be killed by
// a seccomp policy; unconfined they print like any other. Arguments are chosen so that
// nothing happens when a case does succeed on a host: missing paths, invalid magic numbers,
// namespaces of the probe's own.
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string_view>

namespace {

constexpr const char* kMissing = "/nonexistent-smolbox-probe";

long Keyctl() { return syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0); }

long AddKey() {
  return syscall(SYS_add_key, "user", "smolbox-probe", "x", 1, KEY_SPEC_PROCESS_KEYRING);
}

long Bpf() {
  bpf_attr attr{};
  return syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof attr);
}

long PerfEventOpen() {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_TASK_CLOCK;
  attr.exclude_kernel = 1;
  return syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
}

// User-mode-only faults need no privilege (vm.unprivileged_userfaultfd=0 allows them), so only
// the seccomp policy stands between the workload and this call.
long Userfaultfd() { return syscall(SYS_userfaultfd, O_CLOEXEC | 1 /* UFFD_USER_MODE_ONLY */); }

// Attaching to a child of its own: the attack ptrace is for inside a sandbox.
long Ptrace() {
  pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    for (;;) pause();
  }
  long result = syscall(SYS_ptrace, PTRACE_ATTACH, child, nullptr, nullptr);
  int saved = errno;
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  errno = saved;
  return result;
}

long ProcessVmReadv() {
  char source[8] = "probe", target[8] = {};
  iovec local{target, sizeof target};
  iovec remote{source, sizeof source};
  return syscall(SYS_process_vm_readv, getpid(), &local, 1, &remote, 1, 0);
}

long Unshare() { return syscall(SYS_unshare, CLONE_NEWUTS); }
long Setns() { return syscall(SYS_setns, -1, 0); }
long Mount() { return syscall(SYS_mount, "none", kMissing, "tmpfs", 0, nullptr); }
long Umount2() { return syscall(SYS_umount2, kMissing, 0); }
long PivotRoot() { return syscall(SYS_pivot_root, kMissing, kMissing); }
long Chroot() { return syscall(SYS_chroot, kMissing); }
long Fsopen() { return syscall(SYS_fsopen, "smolbox-no-such-fs", 0); }
long OpenTree() { return syscall(SYS_open_tree, AT_FDCWD, kMissing, 0); }
// Linux 6.15; newer than the kernel headers here. 467 on every architecture but alpha.
long OpenTreeAttr() { return syscall(467, AT_FDCWD, kMissing, 0, nullptr, 0); }
long OpenByHandleAt() { return syscall(SYS_open_by_handle_at, -1, nullptr, O_RDONLY); }

long NameToHandleAt() {
  struct {
    unsigned int handle_bytes;
    int handle_type;
  } handle{0, 0};
  int mount_id = 0;
  return syscall(SYS_name_to_handle_at, AT_FDCWD, "/", &handle, &mount_id, 0);
}

long IoUringSetup() {
  io_uring_params params{};
  return syscall(SYS_io_uring_setup, 1, &params);
}

long Clone3() { return syscall(SYS_clone3, nullptr, 0); }
long InitModule() { return syscall(SYS_init_module, nullptr, 0, ""); }
long FinitModule() { return syscall(SYS_finit_module, -1, "", 0); }
long DeleteModule() { return syscall(SYS_delete_module, "smolbox_no_such_module", O_NONBLOCK); }
long Swapon() { return syscall(SYS_swapon, kMissing, 0); }
long Reboot() { return syscall(SYS_reboot, 0, 0, 0, nullptr); }  // bad magic: EINVAL
long Syslog() { return syscall(SYS_syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, nullptr, 0); }
long Settimeofday() { return syscall(SYS_settimeofday, nullptr, nullptr); }  // sets nothing

long ClockSettime() {
  timespec now{};
  return syscall(SYS_clock_settime, CLOCK_MONOTONIC, &now);  // not settable: EINVAL
}

long Iopl() { return syscall(SYS_iopl, 0); }
long Ioperm() { return syscall(SYS_ioperm, 0x80, 1, 0); }  // turning access off

long Socket(int family, int type) {
  long fd = syscall(SYS_socket, family, type, 0);
  if (fd >= 0) close(static_cast<int>(fd));
  return fd;
}

long SocketPacket() { return Socket(AF_PACKET, SOCK_RAW); }
long SocketNetlink() { return Socket(AF_NETLINK, SOCK_RAW); }
long SocketVsock() { return Socket(AF_VSOCK, SOCK_STREAM); }
long SocketUnix() { return Socket(AF_UNIX, SOCK_STREAM); }
long SocketInet() { return Socket(AF_INET, SOCK_STREAM); }

long SocketpairNetlink() {
  int fds[2];
  return syscall(SYS_socketpair, AF_NETLINK, SOCK_RAW, 0, fds);
}

long CloneWith(unsigned long flags) {
  long child = syscall(SYS_clone, flags | SIGCHLD, nullptr, nullptr, nullptr, 0);
  if (child == 0) _exit(0);
  if (child > 0) waitpid(static_cast<pid_t>(child), nullptr, 0);
  return child;
}

long CloneNewuser() { return CloneWith(CLONE_NEWUSER); }
long CloneNewns() { return CloneWith(CLONE_NEWNS); }
long CloneNewnet() { return CloneWith(CLONE_NEWNET); }

long Tiocsti() {
  char c = 'x';
  return syscall(SYS_ioctl, 0, TIOCSTI, &c);
}

// The kernel reads the request as 32 bits: a filter comparing all 64 would miss this one.
long TiocstiHighBits() {
  char c = 'x';
  return syscall(SYS_ioctl, 0, (1UL << 32) | TIOCSTI, &c);
}

long X32Getpid() { return syscall(0x40000000 /* __X32_SYSCALL_BIT */ | SYS_getpid); }

// The i386 ABI from a 64-bit process; getpid is 20 there.
long Int80Getpid() {
  long result = 20;
  asm volatile("int $0x80" : "+a"(result) : : "memory");
  if (result < 0 && result > -4096) {
    errno = static_cast<int>(-result);
    return -1;
  }
  return result;
}

// Reads the LDT, which has nothing in it: changes nothing even where it succeeds.
long ModifyLdt() {
  char ldt[16] = {};
  return syscall(SYS_modify_ldt, 0, ldt, sizeof ldt);
}

long Sysctl() { return syscall(SYS__sysctl, nullptr); }  // gone since Linux 5.5: ENOSYS
long Sysfs() { return syscall(SYS_sysfs, 3); }           // the number of filesystem types

long Ustat() {
  char buf[64] = {};
  return syscall(SYS_ustat, 0, buf);  // no device 0: EINVAL
}

// The kernel checks the capability first, then refuses a name longer than 64 bytes.
long Sethostname() { return syscall(SYS_sethostname, "x", 65); }
long Setdomainname() { return syscall(SYS_setdomainname, "x", 65); }

// In a child with no controlling terminal, so that even a successful hangup hangs up nothing.
long Vhangup() {
  pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    setsid();
    _exit(syscall(SYS_vhangup) == 0 ? 0 : errno);
  }
  int status = 0;
  waitpid(child, &status, 0);
  errno = WIFEXITED(status) ? WEXITSTATUS(status) : EINTR;
  return errno == 0 ? 0 : -1;
}

long Kcmp() { return syscall(SYS_kcmp, getpid(), getpid(), 1 /* KCMP_VM */, 0, 0); }

long FanotifyInit() {
  // The flags an unprivileged caller may use since Linux 5.13.
  unsigned flags = 0x200 /* FAN_REPORT_FID */ | 0x1 /* FAN_CLOEXEC */;
  long fd = syscall(SYS_fanotify_init, flags, O_RDONLY);
  if (fd >= 0) close(static_cast<int>(fd));
  return fd;
}

// The memory-policy calls with MPOL_DEFAULT (0) and empty node masks: no policy changes.
long Mbind() {
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return -1;
  long result = syscall(SYS_mbind, page, 4096, 0, nullptr, 0, 0);
  int saved = errno;
  munmap(page, 4096);
  errno = saved;
  return result;
}

long SetMempolicy() { return syscall(SYS_set_mempolicy, 0, nullptr, 0); }
long GetMempolicy() { return syscall(SYS_get_mempolicy, nullptr, nullptr, 0, nullptr, 0); }

long SetMempolicyHomeNode() {
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return -1;
  long result = syscall(SYS_set_mempolicy_home_node, page, 4096, 0, 0);
  int saved = errno;
  munmap(page, 4096);
  errno = saved;
  return result;
}

long MigratePages() {
  unsigned long none = 0;
  return syscall(SYS_migrate_pages, getpid(), 8 * sizeof none, &none, &none);
}

long MovePages() { return syscall(SYS_move_pages, 0, 0, nullptr, nullptr, nullptr, 0); }

// Linux 6.8 and 6.17, newer than the kernel headers here: the numbers every architecture but
// alpha shares. Sizes of zero, so that nothing is read or changed.
long LsmGetSelfAttr() {
  uint32_t size = 0;
  return syscall(459, 100 /* LSM_ATTR_CURRENT */, nullptr, &size, 0);
}
long LsmSetSelfAttr() { return syscall(460, 100, nullptr, 0, 0); }

long LsmListModules() {
  uint32_t size = 0;
  return syscall(461, nullptr, &size, 0);
}

long FileGetattr() {
  char attr[64] = {};
  return syscall(468, AT_FDCWD, "/", attr, 24 /* FILE_ATTR_SIZE_VER0 */, 0);
}
long FileSetattr() { return syscall(469, AT_FDCWD, kMissing, nullptr, 0, 0); }

// A persona is set and the old one put back at once.
long SetPersona(unsigned long persona) {
  long old = syscall(SYS_personality, 0xffffffffUL);
  long result = syscall(SYS_personality, persona);
  int saved = errno;
  if (result >= 0) syscall(SYS_personality, static_cast<unsigned long>(old >= 0 ? old : 0));
  errno = saved;
  return result;
}

long PersonalityReadImpliesExec() { return SetPersona(0x0400000 /* READ_IMPLIES_EXEC */); }
long PersonalityAddrNoRandomize() { return SetPersona(0x0040000 /* ADDR_NO_RANDOMIZE */); }
long PersonalityLinux32() { return SetPersona(0x0008 /* PER_LINUX32 */); }

long Setuid0() { return syscall(SYS_setuid, 0); }
long Getpid() { return syscall(SYS_getpid); }

struct Case {
  std::string_view name;
  long (*run)();
};

constexpr Case kCases[] = {
    {"getpid", Getpid},
    {"keyctl", Keyctl},
    {"add_key", AddKey},
    {"bpf", Bpf},
    {"perf_event_open", PerfEventOpen},
    {"userfaultfd", Userfaultfd},
    {"ptrace", Ptrace},
    {"process_vm_readv", ProcessVmReadv},
    {"unshare", Unshare},
    {"setns", Setns},
    {"mount", Mount},
    {"umount2", Umount2},
    {"pivot_root", PivotRoot},
    {"chroot", Chroot},
    {"fsopen", Fsopen},
    {"open_tree", OpenTree},
    {"open_tree_attr", OpenTreeAttr},
    {"open_by_handle_at", OpenByHandleAt},
    {"name_to_handle_at", NameToHandleAt},
    {"io_uring_setup", IoUringSetup},
    {"clone3", Clone3},
    {"init_module", InitModule},
    {"finit_module", FinitModule},
    {"delete_module", DeleteModule},
    {"swapon", Swapon},
    {"reboot", Reboot},
    {"syslog", Syslog},
    {"settimeofday", Settimeofday},
    {"clock_settime", ClockSettime},
    {"iopl", Iopl},
    {"ioperm", Ioperm},
    {"socket_packet", SocketPacket},
    {"socket_netlink", SocketNetlink},
    {"socket_vsock", SocketVsock},
    {"socket_unix", SocketUnix},
    {"socket_inet", SocketInet},
    {"socketpair_netlink", SocketpairNetlink},
    {"clone_newuser", CloneNewuser},
    {"clone_newns", CloneNewns},
    {"clone_newnet", CloneNewnet},
    {"tiocsti", Tiocsti},
    {"tiocsti_highbits", TiocstiHighBits},
    {"x32_getpid", X32Getpid},
    {"int80_getpid", Int80Getpid},
    {"setuid0", Setuid0},
    {"modify_ldt", ModifyLdt},
    {"sysctl", Sysctl},
    {"sysfs", Sysfs},
    {"ustat", Ustat},
    {"sethostname", Sethostname},
    {"setdomainname", Setdomainname},
    {"vhangup", Vhangup},
    {"kcmp", Kcmp},
    {"fanotify_init", FanotifyInit},
    {"mbind", Mbind},
    {"set_mempolicy", SetMempolicy},
    {"get_mempolicy", GetMempolicy},
    {"set_mempolicy_home_node", SetMempolicyHomeNode},
    {"migrate_pages", MigratePages},
    {"move_pages", MovePages},
    {"lsm_get_self_attr", LsmGetSelfAttr},
    {"lsm_set_self_attr", LsmSetSelfAttr},
    {"lsm_list_modules", LsmListModules},
    {"file_getattr", FileGetattr},
    {"file_setattr", FileSetattr},
    {"personality_read_implies_exec", PersonalityReadImpliesExec},
    {"personality_addr_no_randomize", PersonalityAddrNoRandomize},
    {"personality_linux32", PersonalityLinux32},
};

const Case* Find(std::string_view name) {
  for (const Case& c : kCases) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

void Report(std::string_view name, long result, int err) {
  if (result >= 0) {
    std::printf("%.*s: ok\n", static_cast<int>(name.size()), name.data());
  } else {
    const char* err_name = strerrorname_np(err);
    std::printf("%.*s: errno=%s\n", static_cast<int>(name.size()), name.data(),
                err_name != nullptr ? err_name : "unknown");
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: syscall_probe CASE...\n");
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    const Case* probe = Find(argv[i]);
    if (probe == nullptr) {
      std::fprintf(stderr, "syscall_probe: unknown case %s\n", argv[i]);
      return 2;
    }
    errno = 0;
    long result = probe->run();
    Report(probe->name, result, errno);
  }
  return 0;
}
