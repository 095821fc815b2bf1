"""What the SDK raises.

ApiError: the server refused the request (4xx/5xx); .field names what was wrong.
SandboxError and its subclasses: the sandbox ended the workload (a limit, the policy) or could
not start it; .limit names the limit hit and .result holds the whole Result.
"""


class SmolboxError(Exception):
    """Every error of this package."""


class ApiError(SmolboxError):
    """The server answered with an error: HTTP status, the field at fault, and why; for a 429,
    the seconds its Retry-After asked the client to wait."""

    def __init__(self, status, field, reason, retry_after=None):
        super().__init__(f"HTTP {status}: {field}: {reason}")
        self.status = status
        self.field = field
        self.reason = reason
        self.retry_after = retry_after


class SandboxError(SmolboxError):
    """The workload did not end on its own. .result is the Result; .limit the limit, if one."""

    limit = None

    def __init__(self, result):
        detail = result.error or ", ".join(result.limits_hit) or result.status
        super().__init__(f"{result.status}: {detail}")
        self.result = result


class LimitExceeded(SandboxError):
    """A limit ended the workload."""


class TimeoutExceeded(LimitExceeded):
    limit = "timeout"


class CpuLimitExceeded(LimitExceeded):
    limit = "cpu"


class MemoryLimitExceeded(LimitExceeded):
    limit = "memory"


class OutputLimitExceeded(LimitExceeded):
    limit = "output"


class PolicyViolation(SandboxError):
    """The workload made a system call the sandbox forbids."""

    limit = "syscall policy"


class SetupError(SandboxError):
    """The sandbox could not be set up, or the run was refused."""


class InternalError(SandboxError):
    """smolbox failed; the workload's fate is unknown."""


_BY_STATUS = {
    "timeout": TimeoutExceeded,
    "cpu_limit": CpuLimitExceeded,
    "memory_limit": MemoryLimitExceeded,
    "output_limit": OutputLimitExceeded,
    "violation": PolicyViolation,
    "setup_error": SetupError,
    "internal_error": InternalError,
}


def error_for(result):
    """The exception for a result that did not end on its own, or None."""
    cls = _BY_STATUS.get(result.status)
    return cls(result) if cls else None
