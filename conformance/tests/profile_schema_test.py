"""docs/profile.schema.json against the profiles and against smolvm-check's own loader.

Every shipped profile validates. Each bad profile below, one field broken at a time, is refused
twice: by the schema (Debian's python3-jsonschema), and by `smolvm-check run`, which exits 2 and
names the field. A good profile passes both and runs. So the schema users write against and the
loader that `run` validates with cannot drift apart unnoticed.

Usage: profile_schema_test.py SMOLVM_CHECK SOURCE_DIR
"""

import copy
import json
import pathlib
import re
import subprocess
import sys
import tempfile

import jsonschema

LIMITS = ["timeout_ms", "cpu_ms", "memory_mib", "cpus", "pids", "storage_mib", "output_bytes", "files"]

# Runs on the host, as the null sandbox does: the one case it runs is functional.hello.sh.
GOOD = {
    "name": "schema-test",
    "description": "the host, as null runs it",
    "command": ["{argv...}"],
    "paths": "host",
    "result": "exit_code",
    "unsupported": LIMITS,
}


# An http profile that names no server: validated for syntax only, so its one case skips.
GOOD_HTTP = {
    "name": "schema-http",
    "description": "an API, never called",
    "kind": "http",
    "endpoint": "unix:/nonexistent/api.sock",
    "calls": [{"method": "POST", "path": "/run", "result": True,
               "body": {"argv": "{argv}", "env": "{env}", "mounts": "{mounts}"}}],
    "mount": {"ro": {"source": "{source}"}, "rw": {"source": "{source}"}},
    "result": "smolbox_json",
    "unsupported": LIMITS,
    "syntax_only": True,
}


def broken(change, good=GOOD):
    profile = copy.deepcopy(good)
    change(profile)
    return profile


def broken_http(change):
    return broken(change, GOOD_HTTP)


def sandbox_paths_without_env(p):
    p.update(paths="sandbox", command=["{mounts...}", "{argv...}"], mount={"ro": ["a"], "rw": ["b"]})


# (field the loader must name, profile with that field broken)
BAD = [
    ("mounts", broken(lambda p: p.update(mounts={}))),
    ("name", broken(lambda p: p.update(name=""))),
    ("name", broken(lambda p: p.pop("name"))),
    ("command", broken(lambda p: p.update(command=["sh", "-c"]))),
    ("command", broken(lambda p: p.update(command="{argv...}"))),
    ("result", broken(lambda p: p.update(result="json"))),
    ("paths", broken(lambda p: p.update(paths="guest"))),
    ("mount", broken(lambda p: p.update(mount={"ro": []}))),
    ("limits", broken(lambda p: p.update(limits={"memory": ["x"]}))),
    ("unsupported", broken(lambda p: p.update(unsupported=LIMITS + ["gpu"]))),
    ("user", broken(lambda p: p.update(user={"admin": []}))),
    ("interpreters", broken(lambda p: p.update(interpreters={"ruby": ["/usr/bin/ruby"]}))),
    ("interpreters", broken(lambda p: p.update(interpreters={"python": []}))),
    ("startup_allowance_ms", broken(lambda p: p.update(startup_allowance_ms=-1))),
    ("startup_allowance_ms", broken(lambda p: p.update(startup_allowance_ms=60001))),
    ("egress", broken(lambda p: p.update(egress={"net": [], "allow_host": []}))),
    ("syntax_only", broken(lambda p: p.update(syntax_only="yes"))),
    ("variables", broken(lambda p: p.update(variables={"workdir": "/x"}))),
    ("variables", broken(lambda p: p.update(variables={"image": 3}))),
    ("variables", broken(lambda p: p.update(variables={"profile_dir": "/x"}))),
    ("setup", broken(lambda p: p.update(setup="make up"))),
    ("teardown", broken(lambda p: p.update(teardown=["rm", 1]))),
    ("env", broken(sandbox_paths_without_env)),
    ("kind", broken(lambda p: p.update(kind="grpc"))),
    ("calls", broken(lambda p: p.update(calls=[]))),
    ("endpoint", broken_http(lambda p: p.update(endpoint="tcp:127.0.0.1:80"))),
    ("endpoint", broken_http(lambda p: p.pop("endpoint"))),
    ("calls", broken_http(lambda p: p.pop("calls"))),
    ("calls", broken_http(lambda p: p["calls"][0].update(result=False))),
    ("calls", broken_http(lambda p: p["calls"][0].update(method="PATCH"))),
    ("calls", broken_http(lambda p: p["calls"][0].update(path="run"))),
    ("command", broken_http(lambda p: p.update(command=["{argv...}"]))),
    ("mount", broken_http(lambda p: p.update(mount={"ro": ["-v"], "rw": ["-v"]}))),
    ("result_fields", broken_http(lambda p: p.update(result_fields={"status": "/s"}))),
]


def run_check(smolvm_check, profile):
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(profile, f)
        f.flush()
        return subprocess.run([smolvm_check, "run", "--sandbox", f.name, "--filter", "functional.hello.sh"],
                              capture_output=True, text=True, timeout=60)


def main():
    smolvm_check, source = sys.argv[1], pathlib.Path(sys.argv[2])
    schema = json.loads((source / "docs/profile.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    failures = []

    shipped = sorted((source / "conformance/profiles").glob("*.json"))
    if len(shipped) < 8:
        failures.append(f"only {len(shipped)} shipped profiles found")
    for path in shipped:
        for error in validator.iter_errors(json.loads(path.read_text())):
            failures.append(f"{path.name}: the schema refuses it: {error.message}")

    for good in (GOOD, GOOD_HTTP):
        if not validator.is_valid(good):
            failures.append(f"the schema refuses the good profile {good['name']}")
        ran = run_check(smolvm_check, good)
        if ran.returncode != 0:
            failures.append(f"run refuses the good profile {good['name']} (exit {ran.returncode}): {ran.stderr.strip()}")

    for field, profile in BAD:
        if validator.is_valid(profile):
            failures.append(f"{field}: the schema accepts {json.dumps(profile)}")
        ran = run_check(smolvm_check, profile)
        # As the loader names fields: `mount:`, `unsupported[8]:`, `egress.allow_cidr:`,
        # `unknown field "mounts"`.
        named = re.search(rf'(^|[\s"]){re.escape(field)}([:\[."]|$)', ran.stderr) is not None
        if ran.returncode != 2 or not named:
            failures.append(f"{field}: run gave exit {ran.returncode} without naming it: {ran.stderr.strip()}")

    for failure in failures:
        print("FAIL", failure)
    print(f"{len(shipped)} shipped profiles, {len(BAD)} bad ones, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
