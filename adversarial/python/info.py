"""Information leaks. Usage: info.py MODE [ARGS...] MARKER

env                  print the whole environment (the runner's env canary must not be there)
processes HOST_PID   BREACH if /proc lists more than a handful of processes, or HOST_PID
others               BREACH if /proc lists a process of another uid (the sandbox's own agent,
                     say), or one that is neither this process nor one of its ancestors
hostname HOST_PID    print the hostname; BREACH if this process shares the UTS namespace (and
                     so the hostname) of HOST_PID, a process on the host
interfaces           BREACH if /proc/net/dev lists any interface but lo
mounts CANARY_DIR    BREACH if /proc/self/mountinfo shows the host's own mounts: a mount point
                     where only a host has one (/sys, /run, /boot, /home, /root, ...), or the
                     canary directory anywhere
masked_proc          BREACH if a file of /proc that runc and docker mask (kernel memory, the
                     kernel's keys, timers and scheduler state) shows any content
volume_source DIR    print where the ro volume DIR really is and the whole mountinfo; the host
                     directory's name carries the runner's token (path_canary), so a sandbox
                     that names the volume's source leaks it. BREACH if the volume's mount
                     names a root inside its filesystem. Under null, DIR is the host path.
descriptors          BREACH if this process holds any descriptor beyond stdin, stdout and stderr:
                     one the sandbox's own setup (or the launcher) left open
cgroup               BREACH if /proc/self/cgroup names any cgroup but "/": without a cgroup
                     namespace of its own, the workload learns the host's cgroup layout
devices              BREACH if /dev holds a device beyond the few a sandbox gives (null, zero,
                     full, random, urandom, tty and the pty and shm entries)
identity HOSTNAME    print the hostname, /etc/hostname and the machine ids; BREACH if either
                     name is the host's HOSTNAME. The host's /etc/machine-id is a token: a
                     sandbox that shows it leaks which host it runs on
ipc KEY              BREACH if the host's System V shared memory segment KEY is listed in
                     /proc/sysvipc/shm; attach it and print what it holds (the runner's token):
                     without an IPC namespace of its own the workload shares the host's
"""
import ctypes
import os
import socket
import sys

ARGS = sys.argv[1:-1]  # the last word is the runner's marker
MAX_PROCESSES = 16


def say(*parts):
    print(*parts, flush=True)


def env():
    for key, value in sorted(os.environ.items()):
        say(f"{key}={value}")


def processes(host_pid):
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    say(f"PROCESSES {len(pids)}: {' '.join(map(str, pids[:40]))}")
    if len(pids) > MAX_PROCESSES:
        say(f"BREACH /proc shows {len(pids)} processes")
    if int(host_pid) in pids:
        try:
            with open(f"/proc/{host_pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            cmdline = "?"
        say(f"BREACH host process {host_pid} is visible: {cmdline}")


def status_fields(pid):
    """The Uid and PPid lines of /proc/PID/status, as {"Uid": [...], "PPid": [...]}, or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return {k: rest.split() for k, _, rest in (line.partition(":") for line in f)
                    if k in ("Uid", "PPid", "Name")}
    except OSError:
        return None  # gone meanwhile, or hidden


def others():
    line = [os.getpid()]
    while line[-1] > 1:
        fields = status_fields(line[-1])
        if not fields or not fields.get("PPid"):
            break
        line.append(int(fields["PPid"][0]))
    me = os.getuid()
    seen = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    say(f"PROCESSES {' '.join(map(str, seen[:40]))}; this one and its ancestors {line}")
    for pid in seen:
        fields = status_fields(pid)
        if not fields:
            continue
        uid = int(fields["Uid"][0])
        name = " ".join(fields.get("Name", ["?"]))
        if uid != me:
            say(f"BREACH process {pid} ({name}) of uid {uid} is visible to uid {me}")
        elif pid not in line:
            say(f"BREACH process {pid} ({name}) is visible and is not this one or an ancestor")


def hostname(host_pid):
    say(f"HOSTNAME {socket.gethostname()}")
    try:
        mine = os.readlink("/proc/self/ns/uts")
        hosts = os.readlink(f"/proc/{host_pid}/ns/uts")
    except OSError as e:
        say(f"HOST UTS NAMESPACE NOT VISIBLE: {e}")
        return
    if mine == hosts:
        say(f"BREACH same UTS namespace as host process {host_pid} ({mine}): "
            f"the hostname {socket.gethostname()} is the host's")
    else:
        say(f"OWN UTS NAMESPACE {mine}, host's {hosts}")


def interfaces():
    with open("/proc/net/dev") as f:
        names = [line.split(":")[0].strip() for line in f.readlines()[2:]]
    say(f"INTERFACES {' '.join(names)}")
    others = [n for n in names if n != "lo"]
    if others:
        say(f"BREACH host interfaces visible: {' '.join(others)}")


HOST_ONLY_MOUNT_POINTS = ("/sys", "/run", "/boot", "/home", "/root", "/var", "/mnt",
                          "/media", "/srv", "/snap", "/opt")


def mounts(canary_dir):
    with open("/proc/self/mountinfo") as f:
        lines = f.read().splitlines()
    say(f"MOUNTS {len(lines)}")
    for line in lines:
        fields = line.split()
        root, point = fields[3], fields[4]
        host_point = any(point == p or point.startswith(p + "/") for p in HOST_ONLY_MOUNT_POINTS)
        if host_point or canary_dir in line:
            say(f"BREACH host mount visible: {root} on {point}")


MASKED_PROC = ["/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug",
               "/proc/latency_stats", "/proc/timer_stats"]


def masked_proc():
    for path in MASKED_PROC:
        try:
            with open(path, "rb") as f:
                head = f.read(64)  # kcore's first bytes are its ELF header: reading is harmless
        except OSError as e:
            say(f"BLOCKED {path}: {e.strerror}")
            continue
        if head:
            say(f"BREACH {path} shows {len(head)}+ bytes")
        else:
            say(f"BLOCKED {path} is empty")


def volume_source(volume):
    with open(os.path.join(volume, "data.txt")) as f:
        say(f"VOLUME READABLE {f.read().strip()}")
    say(f"REALPATH {os.path.realpath(volume)}")
    with open("/proc/self/mountinfo") as f:
        lines = f.read().splitlines()
    for line in lines:
        say(f"MOUNTINFO {line}")
        fields = line.split()
        root, point = fields[3], fields[4]
        if point == volume and root != "/":
            say(f"BREACH the mount on {volume} names its source: {root}")


def descriptors():
    held = []
    for fd in sorted(int(name) for name in os.listdir("/proc/self/fd")):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except FileNotFoundError:
            continue  # the listing's own, closed since
        if fd > 2:
            held.append(fd)
            say(f"BREACH descriptor {fd} is open: {target}")
    if not held:
        say("DESCRIPTORS stdio only")


def cgroup():
    with open("/proc/self/cgroup") as f:
        lines = f.read().splitlines()
    for line in lines:
        path = line.split(":", 2)[-1]
        say(f"CGROUP {line}")
        if path != "/":
            say(f"BREACH /proc/self/cgroup names the host's cgroup {path}")


SANDBOX_DEVICES = {"null", "zero", "full", "random", "urandom", "tty", "console", "ptmx", "pts",
                   "shm", "mqueue", "fd", "stdin", "stdout", "stderr", "core"}


def devices():
    names = sorted(os.listdir("/dev"))
    say(f"DEVICES {' '.join(names)}")
    extra = [name for name in names if name not in SANDBOX_DEVICES]
    if extra:
        say(f"BREACH /dev holds the host's devices: {' '.join(extra[:20])}")


def read_text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read(256).strip()
    except OSError as e:
        return f"unreadable ({e.strerror})"


def identity(host_hostname):
    names = {"gethostname": socket.gethostname(), "/etc/hostname": read_text("/etc/hostname")}
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        say(f"MACHINE-ID {path}: {read_text(path)}")
    # The kernel's own identity is the host's under any sandbox that shares its kernel: shown
    # for the reader, judged by no case (adversarial/README.md).
    say(f"SHARED KERNEL boot_id {read_text('/proc/sys/kernel/random/boot_id')} release {os.uname().release}")
    for source, name in names.items():
        say(f"HOSTNAME {source}: {name}")
        if name == host_hostname:
            say(f"BREACH {source} is the host's hostname {host_hostname}")


def ipc(key):
    with open("/proc/sysvipc/shm") as f:
        rows = [line.split() for line in f.readlines()[1:]]
    listed = [row for row in rows if row and row[0] == key]
    say(f"SHM SEGMENTS {len(rows)}")
    if listed:
        say(f"BREACH the host's shared memory segment {key} is listed: {' '.join(listed[0][:6])}")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    shm_id = libc.shmget(ctypes.c_int(int(key)), ctypes.c_size_t(0), 0)
    if shm_id < 0:
        say(f"BLOCKED shmget {key}: {os.strerror(ctypes.get_errno())}")
        return
    address = libc.shmat(shm_id, None, 0o10000)  # SHM_RDONLY
    if address in (None, ctypes.c_void_p(-1).value):
        say(f"BREACH shmget found {key} (id {shm_id}), shmat refused: {os.strerror(ctypes.get_errno())}")
        return
    say(f"BREACH attached the host's segment {key}: {ctypes.string_at(address, 64).split(bytes(1))[0].decode(errors='replace')}")


MODES = {"env": env, "processes": processes, "others": others, "hostname": hostname,
         "interfaces": interfaces, "mounts": mounts, "masked_proc": masked_proc,
         "volume_source": volume_source, "descriptors": descriptors, "cgroup": cgroup,
         "devices": devices, "identity": identity, "ipc": ipc}

if __name__ == "__main__":
    MODES[ARGS[0]](*ARGS[1:])
