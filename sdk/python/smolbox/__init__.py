"""smolbox: run untrusted code in a sandbox, through `smolbox serve`'s HTTP API.

    import smolbox

    result = smolbox.run(["python3", "-c", "print(6 * 7)"], timeout=5, memory_mib=256)
    print(result.stdout)                       # "42\\n"

    with smolbox.Sandbox.create(memory_mib=256) as sb:
        sb.exec(["python3", "-c", "open('/work/x', 'w').write('kept')"])
        print(sb.exec(["cat", "/work/x"]).stdout)

Only the standard library is used.
"""

from .client import Client, default_address
from .errors import (ApiError, CpuLimitExceeded, InternalError, LimitExceeded, MemoryLimitExceeded,
                     OutputLimitExceeded, PolicyViolation, SandboxError, SetupError, SmolboxError,
                     TimeoutExceeded)
from .result import EgressEvent, OutputEvent, Result, Timings, Usage
from .sandbox import Sandbox, run

__all__ = [
    "ApiError", "Client", "CpuLimitExceeded", "EgressEvent", "InternalError", "LimitExceeded",
    "MemoryLimitExceeded", "OutputEvent", "OutputLimitExceeded", "PolicyViolation", "Result",
    "Sandbox", "SandboxError", "SetupError", "SmolboxError", "TimeoutExceeded", "Timings", "Usage",
    "default_address", "run",
]
