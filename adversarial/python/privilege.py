"""Privilege attacks. Usage: privilege.py MODE MARKER

Each mode makes one privileged request, prints BREACH if the kernel granted it, and undoes it
at once. All of them are harmless on a host where they succeed:
- mount, unshare_mount, chroot: a tmpfs on a fresh temp dir, unmounted right away; the
  namespace and the chroot live in a child that exits;
- ptrace: PTRACE_SEIZE of PID 1 (which does not stop it), detached at once, from a child that
  exits;
- keyctl: a throwaway key in a new session keyring of a child's own;
- bpf, perf, io_uring, userfaultfd: one object, closed at once;
- module: finit_module on /dev/null, which is no module; module_unload: delete_module of a
  name no module has;
- modify_ldt: reads the x86 LDT, which changes nothing;
- clock: CLOCK_REALTIME set to the time it already shows;
- kernel_knobs: two global sysctls written back with the value just read from them,
  /proc/sysrq-trigger opened for writing and closed with no key written, and a count of the
  kernel's knobs that would take a write, none of them opened.
"""
import ctypes
import os
import platform
import sys
import tempfile
import time

ARGS = sys.argv[1:-1]  # the last word is the runner's marker
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

# Syscalls glibc has no wrapper for, by architecture.
SYSCALLS = {
    "x86_64": {"add_key": 248, "keyctl": 250, "bpf": 321, "perf_event_open": 298,
               "io_uring_setup": 425, "userfaultfd": 323, "finit_module": 313,
               "delete_module": 176, "modify_ldt": 154},
    "aarch64": {"add_key": 217, "keyctl": 219, "bpf": 280, "perf_event_open": 241,
                "io_uring_setup": 425, "userfaultfd": 282, "finit_module": 273,
                "delete_module": 106},
}[platform.machine()]


def say(*parts):
    print(*parts, flush=True)


def syscall(name, *args):
    """The raw result and errno of a syscall (result < 0 means failure)."""
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(SYSCALLS[name]), *args)
    return result, ctypes.get_errno()


def errname(errno):
    return f"{os.strerror(errno)} (errno {errno})"


def in_child(fn):
    """Runs fn in a forked child, so that what it changes dies with the child."""
    pid = os.fork()
    if pid == 0:
        try:
            fn()
        finally:
            sys.stdout.flush()
            os._exit(0)
    os.waitpid(pid, 0)


def cap_eff():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0


def setuid():
    say(f"UID {os.getuid()} EUID {os.geteuid()}")
    for label, call in (("setgid(0)", lambda: os.setgid(0)), ("setuid(0)", lambda: os.setuid(0))):
        try:
            call()
        except OSError as e:
            say(f"BLOCKED {label}: {e}")
            continue
        say(f"BREACH {label} succeeded")


def capabilities():
    value = cap_eff()
    say(f"CapEff {value:016x}")
    if value:
        say(f"BREACH effective capabilities {value:#x}")


MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 0x4000, 1 << 18
MNT_DETACH = 2


def mount_tmpfs(target):
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    if libc.mount(b"smolvm-check", target.encode(), b"tmpfs", flags, b"size=1m") != 0:
        say(f"BLOCKED mount tmpfs: {errname(ctypes.get_errno())}")
        return
    say(f"BREACH mounted a tmpfs on {target}")
    libc.umount2(target.encode(), MNT_DETACH)


def mount():
    target = tempfile.mkdtemp(prefix="smolvm-check-mnt-")
    try:
        mount_tmpfs(target)
    finally:
        os.rmdir(target)


def unshare_mount():
    CLONE_NEWNS, CLONE_NEWUSER = 0x20000, 0x10000000
    target = tempfile.mkdtemp(prefix="smolvm-check-mnt-")

    def child():
        for flags, label in ((CLONE_NEWUSER | CLONE_NEWNS, "user+mount"), (CLONE_NEWNS, "mount")):
            if libc.unshare(flags) == 0:
                say(f"BREACH unshare({label}) succeeded")
                break
            say(f"BLOCKED unshare({label}): {errname(ctypes.get_errno())}")
        else:
            return
        # Private first, so that nothing mounted here propagates back to the parent namespace.
        if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
            say(f"could not make / private: {errname(ctypes.get_errno())}")
            return
        mount_tmpfs(target)

    try:
        in_child(child)
    finally:
        os.rmdir(target)


def chroot():
    target = tempfile.mkdtemp(prefix="smolvm-check-root-")

    def child():
        try:
            os.chroot(target)
        except OSError as e:
            say(f"BLOCKED chroot: {e}")
            return
        say(f"BREACH chroot({target}) succeeded")

    try:
        in_child(child)
    finally:
        os.rmdir(target)


def ptrace():
    PTRACE_DETACH, PTRACE_SEIZE = 17, 0x4206
    libc.ptrace.restype = ctypes.c_long
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]

    def child():
        # SEIZE never stops the tracee. DETACH fails with ESRCH while it runs; the tracer's
        # exit, a moment later, detaches it anyway. Some hosts' PID 1 refuses every tracer, so a
        # host process of the runner's ({host_pid}) is tried next.
        for pid in [1] + [int(p) for p in ARGS[1:2]]:
            if libc.ptrace(PTRACE_SEIZE, pid, None, None) != 0:
                say(f"BLOCKED ptrace(PTRACE_SEIZE, {pid}): {errname(ctypes.get_errno())}")
                continue
            libc.ptrace(PTRACE_DETACH, pid, None, None)
            say(f"BREACH ptrace(PTRACE_SEIZE) of pid {pid} succeeded")

    in_child(child)


def keyctl():
    KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_INVALIDATE = 1, 21
    KEY_SPEC_SESSION_KEYRING = -3

    def child():
        ring, err = syscall("keyctl", ctypes.c_long(KEYCTL_JOIN_SESSION_KEYRING), None)
        if ring < 0:
            say(f"BLOCKED keyctl(JOIN_SESSION_KEYRING): {errname(err)}")
            return  # never add a key to a session keyring this process did not create
        key, err = syscall("add_key", b"user", b"smolvm-check-probe", b"x", ctypes.c_size_t(1),
                           ctypes.c_int(KEY_SPEC_SESSION_KEYRING))
        if key < 0:
            say(f"BLOCKED add_key: {errname(err)}")
            return
        syscall("keyctl", ctypes.c_long(KEYCTL_INVALIDATE), ctypes.c_long(key))
        say(f"BREACH add_key created key {key} in a new session keyring")

    in_child(child)


def bpf():
    BPF_MAP_CREATE, BPF_MAP_TYPE_ARRAY = 0, 2
    attr = (ctypes.c_uint32 * 32)()  # union bpf_attr, zero beyond the fields set
    attr[0], attr[1], attr[2], attr[3] = BPF_MAP_TYPE_ARRAY, 4, 4, 1
    fd, err = syscall("bpf", ctypes.c_int(BPF_MAP_CREATE), ctypes.byref(attr), ctypes.c_uint(128))
    if fd < 0:
        say(f"BLOCKED bpf(BPF_MAP_CREATE): {errname(err)}")
        return
    os.close(fd)
    say("BREACH bpf(BPF_MAP_CREATE) returned a map")


def perf():
    # A software clock counting this process in user mode only: allowed by the laxest
    # perf_event_paranoid, and needing no hardware PMU.
    PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, PERF_FLAG_FD_CLOEXEC = 1, 0, 8
    size = 112  # PERF_ATTR_SIZE_VER5
    attr = (ctypes.c_uint8 * size)()
    ctypes.c_uint32.from_buffer(attr, 0).value = PERF_TYPE_SOFTWARE
    ctypes.c_uint32.from_buffer(attr, 4).value = size
    ctypes.c_uint64.from_buffer(attr, 8).value = PERF_COUNT_SW_CPU_CLOCK
    ctypes.c_uint64.from_buffer(attr, 40).value = 1 | 1 << 5 | 1 << 6  # disabled, no kernel/hv
    fd, err = syscall("perf_event_open", ctypes.byref(attr), ctypes.c_int(0), ctypes.c_int(-1),
                      ctypes.c_int(-1), ctypes.c_ulong(PERF_FLAG_FD_CLOEXEC))
    if fd < 0:
        say(f"BLOCKED perf_event_open: {errname(err)}")
        return
    os.close(fd)
    say("BREACH perf_event_open returned an event")


def io_uring():
    params = (ctypes.c_uint8 * 120)()  # struct io_uring_params, all zero
    fd, err = syscall("io_uring_setup", ctypes.c_uint(1), ctypes.byref(params))
    if fd < 0:
        say(f"BLOCKED io_uring_setup: {errname(err)}")
        return
    os.close(fd)
    say("BREACH io_uring_setup returned a ring")


def userfaultfd():
    O_CLOEXEC, O_NONBLOCK, UFFD_USER_MODE_ONLY = 0o2000000, 0o4000, 1
    fd, err = syscall("userfaultfd", ctypes.c_int(O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY))
    if fd < 0 and err == 22:  # EINVAL: a kernel older than UFFD_USER_MODE_ONLY
        fd, err = syscall("userfaultfd", ctypes.c_int(O_CLOEXEC | O_NONBLOCK))
    if fd < 0:
        say(f"BLOCKED userfaultfd: {errname(err)}")
        return
    os.close(fd)
    say("BREACH userfaultfd returned a descriptor")


def in_initial_user_namespace():
    try:
        with open("/proc/self/uid_map") as f:
            return f.read().split() == ["0", "0", "4294967295"]
    except OSError:
        return False


def judge_module_call(call, result, err, success):
    """A module syscall's answer. EPERM means the permission check held; anything else but
    ENOSYS got past it. A kernel without module support answers ENOSYS to everyone; there
    CAP_SYS_MODULE in the initial user namespace is what would load or unload one."""
    EPERM, ENOSYS, CAP_SYS_MODULE = 1, 38, 16
    if result == 0:
        say(f"BREACH {call} {success}")
    elif err == EPERM:
        say(f"BLOCKED {call}: {errname(err)}")
    elif err != ENOSYS:
        say(f"BREACH {call} got past the permission check: {errname(err)}")
    elif cap_eff() & (1 << CAP_SYS_MODULE) and in_initial_user_namespace():
        say(f"BREACH no {call} here, but CAP_SYS_MODULE is held in the initial user namespace")
    else:
        say(f"BLOCKED {call}: {errname(err)}, and no CAP_SYS_MODULE")


def module():
    # /dev/null is no module: the kernel refuses it, but only after the permission check.
    fd = os.open("/dev/null", os.O_RDONLY)
    result, err = syscall("finit_module", ctypes.c_int(fd), b"", ctypes.c_int(0))
    os.close(fd)
    judge_module_call("finit_module", result, err, "accepted /dev/null")


def module_unload():
    # No module has this name: the kernel looks for it only after the permission check, so
    # ENOENT means the check let us through.
    O_NONBLOCK = 0o4000
    result, err = syscall("delete_module", b"smolbox_no_such_module", ctypes.c_int(O_NONBLOCK))
    judge_module_call("delete_module", result, err, "unloaded a module")


# Global, not per network namespace: whoever writes them changes the kernel for everyone.
GLOBAL_KNOBS = ["/proc/sys/kernel/core_pattern", "/proc/sys/vm/overcommit_memory"]
KNOB_TREES = ["/proc/sys", "/proc/irq", "/proc/bus", "/proc/fs"]
MAX_KNOBS_SCANNED = 20000


def write_back(path):
    """Writes the value just read back into the knob: the kernel's state does not change."""
    try:
        with open(path, "rb") as f:
            value = f.read()
        fd = os.open(path, os.O_WRONLY)
    except OSError as e:
        say(f"BLOCKED {path}: {e.strerror}")
        return
    try:
        os.write(fd, value)
        say(f"BREACH wrote {path} (its own value back)")
    except OSError as e:
        say(f"BLOCKED write {path}: {e.strerror}")
    finally:
        os.close(fd)


def writable_knobs():
    """The kernel's knobs that access(W_OK) says would take a write; none is opened."""
    found, scanned = [], 0
    for tree in KNOB_TREES:
        for top, dirs, files in os.walk(tree):
            for name in files:
                scanned += 1
                path = os.path.join(top, name)
                if os.access(path, os.W_OK):
                    found.append(path)
                if scanned >= MAX_KNOBS_SCANNED:
                    return found
    return found


def sysrq():
    # Opening is the whole attack: a write of one key would reboot or crash a real host.
    try:
        fd = os.open("/proc/sysrq-trigger", os.O_WRONLY)
    except OSError as e:
        say(f"BLOCKED /proc/sysrq-trigger: {e.strerror}")
        return
    os.close(fd)
    say("BREACH /proc/sysrq-trigger opened for writing (nothing written)")


def kernel_knobs():
    for path in GLOBAL_KNOBS:
        write_back(path)
    sysrq()
    found = writable_knobs()
    if found:
        say(f"BREACH {len(found)} kernel knobs are writable, e.g. {' '.join(found[:5])}")
    else:
        say("BLOCKED no kernel knob is writable")


def seccomp_mode():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Seccomp:"):
                return int(line.split()[1])
    return 0


def kernel_has(symbol):
    """Whether the kernel has a function: True, False, or None when its symbols are hidden."""
    try:
        with open("/proc/kallsyms") as f:
            names = f.read()
    except OSError:
        return None
    if "sys_getpid" not in names:
        return None
    return symbol in names


def modify_ldt():
    # Reading the LDT (func 0) is harmless and needs no privilege: any answer but a refusal
    # means the syscall reaches the kernel and its LDT code. A seccomp kill ends the payload
    # here, which the case allows. ENOSYS is a refusal where the kernel has modify_ldt, and
    # what everyone gets where it does not (not x86, or no CONFIG_MODIFY_LDT_SYSCALL): there,
    # a process that no seccomp filter holds counts, since a kernel that had it would answer.
    EPERM, ENOSYS = 1, 38
    if "modify_ldt" in SYSCALLS:
        ldt = ctypes.create_string_buffer(16)
        result, err = syscall("modify_ldt", ctypes.c_int(0), ldt, ctypes.c_ulong(len(ldt)))
        present = kernel_has("sys_modify_ldt")
    else:
        result, err, present = -1, ENOSYS, False
    if result >= 0:
        say(f"BREACH modify_ldt read {result} bytes of the LDT: the syscall reaches the kernel")
    elif err == EPERM:
        say(f"BLOCKED modify_ldt: {errname(err)}")
    elif err != ENOSYS:
        say(f"BREACH modify_ldt reached the kernel, which answered {errname(err)}")
    elif present is False and seccomp_mode() == 0:
        say("BREACH no modify_ldt in this kernel, but no seccomp filter either: "
            "a kernel that has it would be reached")
    else:
        say(f"BLOCKED modify_ldt: {errname(err)}")


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def clock():
    # The time written is the time read plus the monotonic time since, so the clock does not move.
    CLOCK_REALTIME = 0
    now = Timespec()
    libc.clock_gettime(CLOCK_REALTIME, ctypes.byref(now))
    read_at = time.monotonic_ns()
    ns = now.tv_sec * 10**9 + now.tv_nsec + (time.monotonic_ns() - read_at)
    target = Timespec(ns // 10**9, ns % 10**9)
    if libc.clock_settime(CLOCK_REALTIME, ctypes.byref(target)) != 0:
        say(f"BLOCKED clock_settime: {errname(ctypes.get_errno())}")
        return
    say("BREACH clock_settime(CLOCK_REALTIME) succeeded (set to the current time)")


MODES = {
    "setuid": setuid, "capabilities": capabilities, "mount": mount,
    "unshare_mount": unshare_mount, "chroot": chroot, "ptrace": ptrace, "keyctl": keyctl,
    "bpf": bpf, "perf": perf, "io_uring": io_uring, "userfaultfd": userfaultfd,
    "module": module, "module_unload": module_unload, "modify_ldt": modify_ldt, "clock": clock,
    "kernel_knobs": kernel_knobs,
}

if __name__ == "__main__":
    MODES[ARGS[0]]()
