"""Disk attacks. Usage: disk.py MODE DIR MARKER

fill:    write DIR/smolvm-check-fill-<pid> up to 512 MiB (`WROTE <MiB> MiB`), then delete it.
inodes:  create up to 20000 empty files in a fresh DIR/smolvm-check-inodes-<pid> (`FILES N`),
         then delete them.
sparse:  grow DIR/sparse.bin (planted by the runner) to an apparent size of 1 GiB with
         ftruncate, or by writing one byte at that offset, and leave it: a sandbox must either
         refuse, or keep it from crossing back to the host (the catalog expects the planted
         content in the output).
descriptors:  open /dev/null up to 256 times (`OPENED N`), which the files limit must stop.
"""
import os
import shutil
import sys

ARGS = sys.argv[1:-1]  # the last word is the runner's marker
MIB = 1 << 20
FILL_LIMIT = 512 * MIB
INODE_LIMIT = 20000
SPARSE_SIZE = 1 << 30


def say(*parts):
    print(*parts, flush=True)


def fill(directory):
    path = os.path.join(directory, f"smolvm-check-fill-{os.getpid()}")
    block = b"\x5a" * MIB
    total = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        while total < FILL_LIMIT:
            os.write(fd, block)
            total += MIB
            if total % (8 * MIB) == 0:
                say(f"WROTE {total // MIB} MiB")
        os.fsync(fd)
        say(f"BREACH wrote {total // MIB} MiB into {directory}")
    except OSError as e:
        say(f"WROTE {total // MIB} MiB")
        say(f"WRITE STOPPED: {e}")
    finally:
        os.close(fd)
        os.unlink(path)


def inodes(directory):
    base = os.path.join(directory, f"smolvm-check-inodes-{os.getpid()}")
    os.mkdir(base)
    count = 0
    try:
        while count < INODE_LIMIT:
            os.close(os.open(os.path.join(base, str(count)), os.O_WRONLY | os.O_CREAT, 0o600))
            count += 1
            if count % 1000 == 0:
                say(f"FILES {count}")
        say(f"BREACH created {count} files")
    except OSError as e:
        say(f"FILES {count}")
        say(f"CREATE STOPPED: {e}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def sparse(directory):
    path = os.path.join(directory, "sparse.bin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        try:
            os.ftruncate(fd, SPARSE_SIZE)
            say(f"SPARSE ftruncate to {SPARSE_SIZE} succeeded")
        except OSError as e:
            say(f"SPARSE ftruncate refused: {e}")
            try:
                os.pwrite(fd, b"\x00", SPARSE_SIZE - 1)
                say(f"SPARSE write at offset {SPARSE_SIZE - 1} succeeded")
            except OSError as e2:
                say(f"SPARSE write refused: {e2}")
        st = os.fstat(fd)
        say(f"SPARSE size={st.st_size} blocks={st.st_blocks}")
    finally:
        os.close(fd)


OPEN_BOUND = 256  # far past the files limit the catalog sets, and harmless without one


def descriptors():
    opened = []
    try:
        while len(opened) < OPEN_BOUND:
            opened.append(os.open("/dev/null", os.O_RDONLY))
    except OSError as e:
        say(f"REFUSED after {len(opened)}: {e.strerror}")
    say(f"OPENED {len(opened)}")
    for fd in opened:
        os.close(fd)


MODES = {"fill": fill, "inodes": inodes, "sparse": sparse, "descriptors": descriptors}

if __name__ == "__main__":
    MODES[ARGS[0]](*ARGS[1:])
