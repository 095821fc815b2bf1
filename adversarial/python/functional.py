"""Ordinary work that a sandbox must let run. Usage: functional.py MODE [ARGS...] MARKER"""
import csv
import json
import os
import sys

ARGS = sys.argv[1:-1]  # the last word is the runner's marker
MIB = 1 << 20


def say(*parts):
    print(*parts, flush=True)


def hello():
    say("hello from python")


def stdin_echo():
    data = sys.stdin.read()
    sys.stdout.write(data)
    say(f"ECHOED {len(data.splitlines())} lines")


def csv_to_json(in_dir, out_dir):
    with open(os.path.join(in_dir, "data.csv"), newline="", encoding="utf-8") as f:
        rows = [{"name": r["name"], "qty": int(r["qty"]), "price": float(r["price"])}
                for r in csv.DictReader(f)]
    with open(os.path.join(out_dir, "data.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(rows, ensure_ascii=False) + "\n")
    say(f"CONVERTED {len(rows)} rows")


def unicode():
    say("UNICODE héllo wörld — ½ € 日本語 Ελληνικά 🙂")


def exit_code():
    say("EXITING 3")
    sys.exit(3)


def memory(mib):
    held = bytearray(b"\x5a") * (int(mib) * MIB)
    say(f"ALLOCATED {len(held) // MIB} MiB OK")


def many_files(directory, count):
    base = os.path.join(directory, "many")
    os.mkdir(base)
    n = int(count)
    for i in range(n):
        with open(os.path.join(base, f"f{i}.txt"), "w") as f:
            f.write(f"{i}\n")
    ok = all(open(os.path.join(base, f"f{i}.txt")).read() == f"{i}\n" for i in range(n))
    for i in range(n):
        os.unlink(os.path.join(base, f"f{i}.txt"))
    os.rmdir(base)
    say(f"FILES {n} {'OK' if ok else 'MISMATCH'}")


def env(name):
    say(f"{name}={os.environ.get(name, '<unset>')}")


def workdir(expected):
    cwd = os.path.realpath(os.getcwd())
    say(f"WORKDIR {'OK' if cwd == os.path.realpath(expected) else 'MISMATCH'} {cwd}")


MODES = {
    "hello": hello, "stdin_echo": stdin_echo, "csv_to_json": csv_to_json, "unicode": unicode,
    "exit_code": exit_code, "memory": memory, "many_files": many_files, "env": env,
    "workdir": workdir,
}

if __name__ == "__main__":
    MODES[ARGS[0]](*ARGS[1:])
