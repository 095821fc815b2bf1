"""Signals and lifetime. Usage: signals.py MODE [ARGS...] MARKER

daemon OUT   double-fork a daemon that outlives the run: it sleeps 3 s, then writes
             OUT/late.txt, and exits (within 10 s in any case). It keeps the marker in its argv.
sigurg       kill(-1, SIGURG): every process this one may signal. SIGURG is ignored by default;
             the runner's host-side detector handles it and reports who sent it.
tiocsti FD   push a few characters into the terminal FD with TIOCSTI (detected host-side)
"""
import fcntl
import os
import signal
import sys
import termios
import time

ARGS = sys.argv[1:-1]  # the last word is the runner's marker


def say(*parts):
    print(*parts, flush=True)


def daemon(out):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)  # let go of the runner's pipes, as a daemon does
        try:
            time.sleep(3)
            with open(os.path.join(out, "late.txt"), "w") as f:
                f.write("written by a daemon after the run\n")
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    say("DAEMON STARTED")


def sigurg():
    try:
        os.kill(-1, signal.SIGURG)
    except OSError as e:
        say(f"kill(-1, SIGURG): {e}")
        return
    say("SENT SIGURG to every process allowed")


def tiocsti(number):
    fd = int(number)
    injected = 0
    for ch in b"xyz":
        try:
            fcntl.ioctl(fd, termios.TIOCSTI, bytes([ch]))
            injected += 1
        except OSError as e:
            say(f"BLOCKED TIOCSTI on fd {fd}: {e}")
            break
    if injected:
        say(f"BREACH TIOCSTI injected {injected} characters into fd {fd}")


MODES = {"daemon": daemon, "sigurg": sigurg, "tiocsti": tiocsti}

if __name__ == "__main__":
    MODES[ARGS[0]](*ARGS[1:])
