"""Typed results: a Result is what `smolbox run --json` prints, field for field."""

from dataclasses import dataclass, field
from typing import List, Optional


@dataclass(frozen=True)
class Usage:
    wall_ms: int = 0
    cpu_ms: int = 0
    peak_memory_bytes: int = 0


@dataclass(frozen=True)
class Timings:
    setup_ms: int = 0
    boot_ms: int = 0
    run_ms: int = 0
    teardown_ms: int = 0


@dataclass(frozen=True)
class EgressEvent:
    kind: str
    name: str = ""
    address: str = ""
    port: int = 0
    type: str = ""
    allowed: bool = False
    reason: str = ""
    bytes_in: int = 0
    bytes_out: int = 0


@dataclass(frozen=True)
class Result:
    status: str
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    usage: Usage = field(default_factory=Usage)
    limits_hit: List[str] = field(default_factory=list)
    timings: Timings = field(default_factory=Timings)
    backend: str = ""
    isolation: str = ""
    warnings: List[str] = field(default_factory=list)
    egress: List[EgressEvent] = field(default_factory=list)
    error: str = ""

    @property
    def ok(self):
        """The workload exited with status 0."""
        return self.status == "exited" and self.exit_code == 0

    @classmethod
    def from_json(cls, data):
        def pick(kind, obj):
            names = kind.__dataclass_fields__
            return kind(**{k: v for k, v in (obj or {}).items() if k in names})

        return cls(
            status=data["status"],
            exit_code=data.get("exit_code"),
            signal=data.get("signal"),
            stdout=data.get("stdout", ""),
            stderr=data.get("stderr", ""),
            stdout_truncated=data.get("stdout_truncated", False),
            stderr_truncated=data.get("stderr_truncated", False),
            usage=pick(Usage, data.get("usage")),
            limits_hit=list(data.get("limits_hit", [])),
            timings=pick(Timings, data.get("timings")),
            backend=data.get("backend", ""),
            isolation=data.get("isolation", ""),
            warnings=list(data.get("warnings", [])),
            egress=[pick(EgressEvent, e) for e in data.get("egress", [])],
            error=data.get("error", ""),
        )


@dataclass(frozen=True)
class OutputEvent:
    """A piece of an exec's output, as it came: stream is "stdout" or "stderr"."""

    stream: str
    data: str
