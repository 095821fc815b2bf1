"""Memory attacks. Usage: memory.py MODE MARKER

Each bomb stops at LIMIT (2 GiB) and prints what it holds as `ALLOCATED <MiB> MiB`; reaching
the limit prints BREACH. Pages are written, not just reserved, so they count.
"""
import mmap
import os
import sys
import threading

ARGS = sys.argv[1:-1]  # the last word is the runner's marker
MIB = 1 << 20
LIMIT = 2048 * MIB


def say(*parts):
    print(*parts, flush=True)


def bytearray_growth():
    held, total = [], 0
    while total < LIMIT:
        held.append(bytearray(b"\x5a") * (64 * MIB))  # filled, so every page is touched
        total += 64 * MIB
        say(f"ALLOCATED {total // MIB} MiB")
    say(f"BREACH held {total // MIB} MiB of bytearrays")


def mmap_touch():
    page = mmap.PAGESIZE
    block = b"\x5a" * MIB
    held, total = [], 0
    while total < LIMIT:
        m = mmap.mmap(-1, 64 * MIB, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        for _ in range(64):
            m.write(block)
        m[page - 1] = 1
        held.append(m)
        total += 64 * MIB
        say(f"ALLOCATED {total // MIB} MiB")
    say(f"BREACH mapped and touched {total // MIB} MiB")


def threads():
    # Each thread holds 32 MiB of its own; 64 threads reach the limit.
    release = threading.Event()
    ready = threading.Semaphore(0)
    held = []

    def worker():
        held.append(bytearray(b"\x5a") * (32 * MIB))
        ready.release()
        release.wait(20)

    threading.stack_size(256 * 1024)
    started, total = [], 0
    try:
        while total < LIMIT:
            t = threading.Thread(target=worker, daemon=True)
            t.start()
            started.append(t)
            ready.acquire()
            total += 32 * MIB
            say(f"THREADS {len(started)} ALLOCATED {total // MIB} MiB")
        say(f"BREACH {len(started)} threads hold {total // MIB} MiB")
    except (RuntimeError, MemoryError) as e:
        say(f"STOPPED at {len(started)} threads: {e}")
    finally:
        release.set()
        for t in started:
            t.join(5)


def shm():
    # /dev/shm is memory on most hosts; a sandbox must count it against some limit.
    path = f"/dev/shm/smolvm-check-{os.getpid()}"
    block = b"\x5a" * MIB
    total = 0
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as e:
        say(f"NO SHM {e}")
        return
    try:
        while total < LIMIT:
            os.write(fd, block)
            total += MIB
            if total % (16 * MIB) == 0:
                say(f"SHM {total // MIB} MiB")
        say(f"BREACH wrote {total // MIB} MiB into /dev/shm")
    except OSError as e:
        say(f"SHM {total // MIB} MiB")
        say(f"SHM STOPPED: {e}")
    finally:
        os.close(fd)
        os.unlink(path)


MODES = {
    "bytearray": bytearray_growth,
    "mmap": mmap_touch,
    "threads": threads,
    "shm": shm,
}

if __name__ == "__main__":
    MODES[ARGS[0]]()
