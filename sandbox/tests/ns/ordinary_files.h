// What ordinary programs do with the sandbox's writable storage, one line per check, for both
// backends: a file mapped shared and written, a FIFO between two processes, multiprocessing's
// semaphores (/dev/shm), SQLite in WAL mode (its index is mapped shared), and mknod of a device
// refused with EPERM. Each line names the directory and says "ok" or what failed.
#pragma once

namespace smolbox::testing {

inline constexpr const char* kOrdinaryFilesPython = R"py(
import errno, mmap, multiprocessing, os, sqlite3, stat, sys

def shared_map(d):
    path = os.path.join(d, "map.bin")
    with open(path, "w+b") as f:
        f.truncate(4096)
        m = mmap.mmap(f.fileno(), 4096)
        m[:5] = b"hello"
        m.flush()
        m.close()
    with open(path, "rb") as f:
        return "ok" if f.read(5) == b"hello" else "read back something else"

def fifo(d):
    path = os.path.join(d, "pipe")
    os.mkfifo(path)
    pid = os.fork()
    if pid == 0:
        with open(path, "wb") as w:
            w.write(b"through the fifo")
        os._exit(0)
    with open(path, "rb") as r:
        data = r.read()
    os.waitpid(pid, 0)
    return "ok" if data == b"through the fifo" else repr(data)

def wal(d):
    db = sqlite3.connect(os.path.join(d, "wal.db"))
    mode = db.execute("pragma journal_mode=wal").fetchone()[0]
    db.execute("create table t (x)")
    db.execute("insert into t values (42)")
    db.commit()
    other = sqlite3.connect(os.path.join(d, "wal.db"))
    rows = other.execute("select x from t").fetchall()
    return "ok" if (mode, rows) == ("wal", [(42,)]) else repr((mode, rows))

def mknod(d):
    try:
        os.mknod(os.path.join(d, "null"), stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except OSError as e:
        return "ok" if e.errno == errno.EPERM else errno.errorcode[e.errno]
    return "made a device"

def pool(_):
    with multiprocessing.Pool(2) as p:
        return "ok" if p.map(abs, [-1, -2, -3]) == [1, 2, 3] else "wrong answer"

def check(name, d, f):
    try:
        print(name, d, f(d))
    except Exception as e:
        print(name, d, type(e).__name__, e)

if __name__ == "__main__":
    for d in sys.argv[1:]:
        for name, f in [("mmap", shared_map), ("fifo", fifo), ("wal", wal), ("mknod", mknod)]:
            check(name, d, f)
    check("pool", "/dev/shm", pool)
)py";

inline constexpr const char* kOrdinaryFilesExpected =
    "mmap /tmp ok\nfifo /tmp ok\nwal /tmp ok\nmknod /tmp ok\n"
    "mmap /work ok\nfifo /work ok\nwal /work ok\nmknod /work ok\n"
    "pool /dev/shm ok\n";

}  // namespace smolbox::testing
