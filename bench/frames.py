"""Reading the answer to a JSON-RPC request, for the benchmarks that drive Raven over
ACP, Raven RPC and A2A: an error frame is shown as Raven sent it, not met with a
`KeyError: 'result'`.

Imported by the scripts beside it (`bench/` is on their path when they run).
"""

from __future__ import annotations

import json
from typing import Any


class ErrorFrame(Exception):
    """The server answered a request with a JSON-RPC error (or with neither result nor
    error); the message carries the method and the frame."""


def result_of(frame: dict[str, Any], method: str) -> Any:
    """`frame`'s result; `ErrorFrame` naming `method` and the error it got instead."""
    if "result" in frame:
        return frame["result"]
    said = frame.get("error", frame)
    raise ErrorFrame(f"{method} was answered with an error: {json.dumps(said)[:2000]}")
