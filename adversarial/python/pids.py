"""Process and thread bombs. Usage: pids.py MODE MARKER

Each stops at CAP and prints how many it made (`SPAWNED N`); children sleep briefly and exit.
Forked children keep the marker in their argv, so the runner can find any that outlive the run.
"""
import os
import subprocess
import sys
import threading
import time

ARGS = sys.argv[1:-1]  # the last word is the runner's marker
MARKER = sys.argv[-1]
CAP = 300
CHILD_SLEEP_S = 2


def say(*parts):
    print(*parts, flush=True)


def fork_bomb():
    children = []
    try:
        while len(children) < CAP:
            pid = os.fork()
            if pid == 0:
                time.sleep(CHILD_SLEEP_S)
                os._exit(0)
            children.append(pid)
    except OSError as e:
        say(f"FORK FAILED after {len(children)}: {e}")
    say(f"SPAWNED {len(children)}")
    for pid in children:
        os.waitpid(pid, 0)


def thread_bomb():
    release = threading.Event()
    threading.stack_size(256 * 1024)
    threads = []
    try:
        while len(threads) < CAP:
            t = threading.Thread(target=release.wait, args=(CHILD_SLEEP_S,), daemon=True)
            t.start()
            threads.append(t)
    except RuntimeError as e:
        say(f"THREAD FAILED after {len(threads)}: {e}")
    say(f"SPAWNED {len(threads)}")
    release.set()
    for t in threads:
        t.join()


def spawn_loop():
    # `sleep; :` keeps sh alive (dash execs a lone last command), so the marker stays visible.
    children = []
    try:
        while len(children) < CAP:
            children.append(subprocess.Popen(
                ["/bin/sh", "-c", f"sleep {CHILD_SLEEP_S}; :", MARKER],
                stdin=subprocess.DEVNULL))
    except OSError as e:
        say(f"SPAWN FAILED after {len(children)}: {e}")
    say(f"SPAWNED {len(children)}")
    for child in children:
        child.wait()


MODES = {"fork_bomb": fork_bomb, "thread_bomb": thread_bomb, "spawn_loop": spawn_loop}

if __name__ == "__main__":
    MODES[ARGS[0]]()
