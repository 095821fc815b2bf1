#include "python_zygote_program.h"

namespace smolbox::agent {

const std::string_view kPythonZygoteProgram = R"PY(
import ctypes, gc, importlib, io, os, resource, site, socket, sys, types
# What scripts most often start with, loaded once here. Nothing that seeds state an exec could
# predict from another's (random, uuid, secrets): those load in each exec, fresh.
import collections, csv, dataclasses, datetime, functools, itertools, json, math, pathlib, re, typing

PR_SET_DUMPABLE = 4
libc = ctypes.CDLL(None, use_errno=True)


def set_dumpable(value):
    if libc.prctl(PR_SET_DUMPABLE, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE)")


def serve():
    """Returns only in a fork, with one exec's request and fds."""
    control = socket.socket(fileno=0)
    while True:
        message, fds, _, _ = socket.recv_fds(control, 1 << 20, 4)
        if not message:
            os._exit(0)
        if len(fds) != 4:
            for fd in fds:
                os.close(fd)
            continue
        pid = os.fork()
        if pid == 0:
            control.detach()
            return message, fds
        for fd in fds:
            os.close(fd)
        os.waitpid(pid, 0)


def become_workload(message, fds):
    stdin, stdout, stderr, status = fds
    step = "request"
    try:
        request = json.loads(message)
        step = "stdio"
        os.dup2(stdin, 0)
        os.dup2(stdout, 1)
        os.dup2(stderr, 2)
        os.closerange(3, status)
        os.closerange(status + 1, 1 << 20)
        step = "chdir " + request["cwd"]
        if request["cwd"]:
            os.chdir(request["cwd"])
        step = "environment"
        os.environ.clear()
        os.environ.update(request["env"])
        step = "rlimits"
        for limit, soft, hard in request["rlimits"]:
            held = resource.getrlimit(limit)[1]
            cap = (lambda v: v) if held == resource.RLIM_INFINITY else (lambda v: min(v, held))
            resource.setrlimit(limit, (cap(soft), cap(hard)))
        step = "dumpable"
        set_dumpable(1)
    except Exception as e:
        os.write(status, f"E {step}: {e}".encode())
        os._exit(125)
    os.write(status, str(os.getpid()).encode())
    if os.read(status, 1) != b"g":
        os._exit(125)
    os.close(status)
    return request


# The zygote itself: not dumpable, so that no exec, running as the same uid, can ptrace it or
# write its memory, which every later exec would inherit.
set_dumpable(0)
# Out of reach of each fork's garbage collections: otherwise they touch, and so copy, every page
# of the zygote's heap (about 70 ms of a fork's exit under TCG).
gc.freeze()
os.write(1, b"r")
message, fds = serve()
parent = os.getpid()
if os.fork() != 0:
    os._exit(0)
while os.getppid() == parent:  # until the agent has adopted it, and so may wait for it
    os.sched_yield()
os.setsid()  # its own session and process group, as a plain exec's
request = become_workload(message, fds)
del message, fds

# What a fresh start would find now and the zygote could not: modules, a user site directory or
# .pth files installed since it started (pip install --user in an earlier exec).
importlib.invalidate_caches()
known = set(sys.path)
site.main()
user_site = site.getusersitepackages()
if user_site in sys.path and user_site not in known:  # before the system's, where a start puts it
    sys.path.remove(user_site)
    system = [i for i, entry in enumerate(sys.path) if entry in site.getsitepackages()]
    sys.path.insert(system[0] if system else len(sys.path), user_site)
del known, user_site

argv = request["argv"]
i = 1
while argv[i] in ("-u", "-B"):
    i += 1
options, rest = argv[1:i], argv[i:]
if "-B" in options:
    sys.dont_write_bytecode = True
if "-u" in options:  # as -u makes them at start: text over the unbuffered file, written through
    for name, fd in (("stdout", 1), ("stderr", 2)):
        old = getattr(sys, name)
        raw = io.FileIO(fd, "w", closefd=False)
        raw.name = f"<{name}>"
        stream = io.TextIOWrapper(raw, old.encoding, old.errors, write_through=True)
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
main = types.ModuleType("__main__")
if rest[0] == "-c":
    source, filename = rest[1], "<string>"
    sys.argv = ["-c"] + rest[2:]
    sys.path[0] = ""
else:
    filename = rest[0]
    try:
        with open(filename, "rb") as f:
            source = f.read()
    except OSError as e:
        path = os.path.abspath(filename)
        sys.stderr.write(f"{argv[0]}: can't open file {path!r}: [Errno {e.errno}] {e.strerror}\n")
        sys.exit(2)
    main.__file__ = filename
    main.__cached__ = None
    sys.argv = rest
    sys.path[0] = os.path.dirname(os.path.realpath(filename))
sys.modules["__main__"] = main
del request, argv, options, rest
exec(compile(source, filename, "exec"), main.__dict__)
)PY";

}  // namespace smolbox::agent
