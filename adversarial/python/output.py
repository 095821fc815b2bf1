"""Output floods. Usage: output.py MODE MARKER

Each flood stops at 64 MiB, then says `FLOOD DONE` on the other stream: a sandbox that caps
output ends the run before that line.
"""
import os
import sys

ARGS = sys.argv[1:-1]  # the last word is the runner's marker
MIB = 1 << 20
FLOOD = 64 * MIB


def flood(fd, chunk):
    written = 0
    while written < FLOOD:
        written += os.write(fd, chunk)
    return written


def stdout_flood():
    n = flood(1, b"smolvm-check stdout flood line\n" * 32768)
    os.write(2, f"FLOOD DONE {n} bytes on stdout\n".encode())


def stderr_flood():
    n = flood(2, b"smolvm-check stderr flood line\n" * 32768)
    os.write(1, f"FLOOD DONE {n} bytes on stderr\n".encode())


def endless_line():
    n = flood(1, b"A" * MIB)
    os.write(1, b"\n")
    os.write(2, f"FLOOD DONE {n} bytes on one line\n".encode())


MODES = {"stdout": stdout_flood, "stderr": stderr_flood, "endless_line": endless_line}

if __name__ == "__main__":
    MODES[ARGS[0]]()
