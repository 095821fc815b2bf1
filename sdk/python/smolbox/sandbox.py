"""One-shot runs and persistent sandboxes."""

from urllib.parse import quote

from .client import Client
from .errors import SmolboxError, error_for
from .result import OutputEvent, Result

_LIMITS = ("memory_mib", "cpus", "pids", "storage_mib", "timeout_ms", "cpu_ms", "output_bytes", "files")


def _words(value):
    """A command's words: a string is one word (a program), never its characters."""
    return [value] if isinstance(value, str) else list(value)


def _spec(argv=None, *, stdin=None, env=None, workdir=None, timeout=None, cpu_time=None, backend=None,
          image=None, user=None, network=None, egress=None, ca_bundle=None, mounts=None, entrypoint=None,
          prewarm=None, **limits):
    """A RunSpec from keyword arguments. Times are in seconds; sizes as the spec's own fields."""
    spec = {}
    if argv is not None:
        spec["argv"] = _words(argv)
    if entrypoint is not None:
        spec["entrypoint"] = _words(entrypoint)
    for key, value in (("stdin", stdin), ("env", env), ("workdir", workdir), ("backend", backend),
                       ("image", image), ("user", user), ("network", network), ("egress", egress),
                       ("ca_bundle", ca_bundle), ("mounts", mounts), ("prewarm", prewarm)):
        if value is not None:
            spec[key] = value
    spec_limits = {}
    if timeout is not None:
        spec_limits["timeout_ms"] = int(timeout * 1000)
    if cpu_time is not None:
        spec_limits["cpu_ms"] = int(cpu_time * 1000)
    for key, value in limits.items():
        if key not in _LIMITS:
            raise TypeError(f"unknown argument {key!r}")
        if value is not None:
            spec_limits[key] = value
    if spec_limits:
        spec["limits"] = spec_limits
    return spec


def _checked(result, check):
    error = error_for(result) if check else None
    if error:
        raise error
    return result


def run(argv, *, client=None, check=True, **options):
    """Runs argv in a fresh sandbox that is gone when this returns.

    options: stdin (str), env (dict), workdir, timeout and cpu_time (seconds), memory_mib, cpus,
    pids, storage_mib, output_bytes, files, backend ("ns", "vm"), image, user, network, egress,
    ca_bundle (PEM text: certificates added to the sandbox's trust store), mounts (a list of
    {"source", "target", "mode"}, sources beneath the server's --volume-root) and entrypoint (a
    list, replacing the image's Entrypoint and dropping its Cmd). With check (the default), a limit hit raises its LimitExceeded (TimeoutExceeded, ...) and a
    setup failure SetupError; a non-zero exit is the code's own and is returned.
    """
    client = client or Client()
    return _checked(Result.from_json(client.request("POST", "/v1/run", _spec(argv, **options))), check)


class Sandbox:
    """A sandbox that serves many execs, until removed. As a context manager it is removed on
    exit, whatever happened inside."""

    def __init__(self, client, sandbox_id, info):
        self.client = client
        self.id = sandbox_id
        self.info = info
        self.files = Files(self)

    @classmethod
    def create(cls, *, client=None, **options):
        """Starts a sandbox. options as run's, without argv and stdin: env, workdir and the
        exec limits (timeout, ...) become each exec's defaults."""
        client = client or Client()
        if "stdin" in options:
            raise TypeError("stdin is an exec's, not a sandbox's")
        info = client.request("POST", "/v1/sandboxes", _spec(**options))
        return cls(client, info["id"], info)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()

    def _path(self, suffix=""):
        return f"/v1/sandboxes/{quote(self.id, safe='')}{suffix}"

    def exec_iter(self, argv, *, stdin=None, env=None, workdir=None, timeout=None):
        """Yields OutputEvents as the workload writes, then its Result. Closing the iterator early
        ends the workload."""
        body = {"argv": _words(argv)}
        if stdin is not None:
            body["stdin"] = stdin
        if env is not None:
            body["env"] = env
        if workdir is not None:
            body["workdir"] = workdir
        if timeout is not None:
            body["timeout_ms"] = int(timeout * 1000)
        for line in self.client.stream("POST", self._path("/exec"), body):
            if line.get("type") == "result":
                yield Result.from_json(line["result"])
                return
            yield OutputEvent(line["type"], line["data"])
        raise SmolboxError("the exec's reply ended without a result")

    def exec(self, argv, *, on_output=None, check=True, **options):
        """Runs argv in this sandbox and returns its Result, with the output in it. on_output,
        if given, is called with each OutputEvent as it comes. check as for run."""
        out, err = [], []
        for event in self.exec_iter(argv, **options):
            if isinstance(event, Result):
                result = Result.from_json({**_as_json(event), "stdout": "".join(out), "stderr": "".join(err)})
                return _checked(result, check)
            (out if event.stream == "stdout" else err).append(event.data)
            if on_output:
                on_output(event)
        raise SmolboxError("the exec's reply ended without a result")

    def status(self):
        return self.client.request("GET", self._path())

    def remove(self):
        """Stops and removes the sandbox, mid-exec too."""
        self.client.request("DELETE", self._path())


class Files:
    """A sandbox's files, read and written inside it: regular files only, and a final symbolic
    link is refused rather than followed. Paths are absolute, as the sandbox sees them."""

    def __init__(self, sandbox):
        self._sandbox = sandbox

    def _path(self, path):
        if not path.startswith("/"):
            raise ValueError(f"{path!r}: a sandbox path must be absolute, e.g. /work/data.csv")
        return self._sandbox._path("/files/" + quote(path.lstrip("/")))

    def write(self, path, data):
        """Writes data (bytes, or str as UTF-8) to path, making its directories. An upload over
        the sandbox's storage limit raises ApiError (507) and leaves nothing behind."""
        if isinstance(data, str):
            data = data.encode()
        return self._sandbox.client.request("PUT", self._path(path), data, "application/octet-stream")

    def read(self, path):
        """The file's bytes, up to the sandbox's output limit (limits.output_bytes)."""
        return self._sandbox.client.request_bytes("GET", self._path(path))

    def read_text(self, path, encoding="utf-8"):
        return self.read(path).decode(encoding)


def _as_json(result):
    from dataclasses import asdict

    return asdict(result)
