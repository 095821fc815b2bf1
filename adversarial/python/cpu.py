"""CPU attacks. Usage: cpu.py MODE MARKER

on_time              spins, printing ELAPSED_MS every 100 ms: a timeout that holds only at a later
                     backstop shows as milliseconds well past the limit
cpu_in_children      CHILDREN processes, one after another, each using CHILD_CPU_S of CPU: each
                     stays under a per-process RLIMIT_CPU, together they use several seconds,
                     so only a CPU-time limit on the whole sandbox ends them
share                two processes spin for SHARE_S seconds of wall time; CPU_SHARE_PERMILLE
                     says how much CPU they got per second, in thousandths of a CPU (about
                     2000 on an idle host with two cores, the cpus limit under a quota)

Every loop ends by itself after BOUND_S seconds, well past the timeouts the catalog sets, so
that a sandbox without a timeout shows up as a run that lasted BOUND_S and exited normally.
"""
import os
import re
import signal
import sys
import threading
import time

ARGS = sys.argv[1:-1]  # the last word is the runner's marker
BOUND_S = 10.0
START = time.monotonic()


def say(*parts):
    print(*parts, flush=True)


def elapsed():
    return time.monotonic() - START


def spin(label="LOOP"):
    last = 0
    while True:
        now = elapsed()
        if now >= BOUND_S:
            break
        if int(now) > last:
            last = int(now)
            say(f"ELAPSED {last}")
    say(f"{label} DONE after {elapsed():.1f}s")


def while_true():
    spin()


def on_time():
    last = 0
    while elapsed() < BOUND_S:
        now_ms = int(elapsed() * 1000)
        if now_ms >= last + 100:
            last = now_ms
            say(f"ELAPSED_MS {now_ms}")
    say(f"LOOP DONE after {elapsed():.1f}s")


def busy_threads():
    threads = [threading.Thread(target=spin, args=(f"THREAD {i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    say("LOOP DONE")


def regex():
    # (a+)+$ backtracks exponentially on a run of a's that does not end the string: each extra
    # character doubles the time. Grow n while the next match still fits in the bound.
    pattern = re.compile(r"^(a+)+$")
    n = 14
    while elapsed() < BOUND_S:
        t0 = time.monotonic()
        pattern.match("a" * n + "!")
        dt = time.monotonic() - t0
        say(f"REGEX n={n} took {dt:.3f}s")
        left = BOUND_S - elapsed()
        if 2.5 * dt < left:
            n += 1
        elif dt > left and n > 14:
            n -= 1
    say(f"REGEX DONE after {elapsed():.1f}s")


def ignore_sigterm():
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU):
        signal.signal(sig, lambda s, _f: say(f"IGNORED signal {s}"))
    spin()


def sigstop():
    # A stopped process uses no CPU and may be missed by a timeout that counts CPU or waits for
    # activity. A child resumes us after the bound, so the payload still ends by itself.
    me = os.getpid()
    child = os.fork()
    if child == 0:
        time.sleep(BOUND_S)
        try:
            os.kill(me, signal.SIGCONT)
        finally:
            os._exit(0)
    say("STOPPING myself")
    os.kill(me, signal.SIGSTOP)
    say(f"RESUMED after {elapsed():.1f}s")
    os.waitpid(child, 0)


CHILDREN = 8
CHILD_CPU_S = 0.6


def cpu_in_children():
    for i in range(CHILDREN):
        pid = os.fork()
        if pid == 0:
            begin = time.process_time()
            while time.process_time() - begin < CHILD_CPU_S:
                pass
            os._exit(0)
        os.waitpid(pid, 0)
        say(f"CHILD {i} DONE")
    say(f"LOOP DONE after {elapsed():.1f}s")


SHARE_S = 3.0
SPINNERS = 2


def share():
    begin = time.monotonic()
    children = []
    for _ in range(SPINNERS):
        pid = os.fork()
        if pid == 0:
            while time.monotonic() - begin < SHARE_S:
                pass
            os._exit(0)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)
    wall = time.monotonic() - begin
    used = os.times()
    cpu = used.children_user + used.children_system
    say(f"CPU {cpu:.2f}s in {wall:.2f}s of wall time")
    say(f"CPU_SHARE_PERMILLE {int(cpu * 1000 / wall)}")


MODES = {
    "share": share,
    "while_true": while_true,
    "on_time": on_time,
    "busy_threads": busy_threads,
    "cpu_in_children": cpu_in_children,
    "regex": regex,
    "ignore_sigterm": ignore_sigterm,
    "sigstop": sigstop,
}

if __name__ == "__main__":
    MODES[ARGS[0]]()
