"""Sleeps past the timeout. Usage: sleep.py SECONDS MARKER

A sleeping process uses no CPU: only a wall-clock timeout ends it.
"""
import sys
import time

ARGS = sys.argv[1:-1]  # the last word is the runner's marker
time.sleep(float(ARGS[0]))
print(f"SLEPT {ARGS[0]}s", flush=True)
