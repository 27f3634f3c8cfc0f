"""Whether the a2a SDK traces: off unless the user has configured OpenTelemetry.

The SDK wraps every handler and queue call in an OpenTelemetry span when
`opentelemetry-api` is importable, and decides once, when `a2a.utils.telemetry`
is first imported, from `OTEL_INSTRUMENTATION_A2A_SDK_ENABLED`. With no
OpenTelemetry configuration those spans go nowhere and cost about a fifth of a
served request. Must never leave the process environment changed: commands
Raven runs inherit it.
"""

from __future__ import annotations

import os
import sys
from typing import Any

SDK_SWITCH = "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED"


def user_configured_tracing(environ: dict[str, str] | os._Environ[str]) -> bool:
    """True when any OpenTelemetry setting is present, the SDK's own switch included."""
    return any(name.startswith("OTEL_") for name in environ)


def load_sdk_telemetry() -> None:
    """Import the SDK's telemetry with tracing off, unless the user set OpenTelemetry up."""
    if "a2a.utils.telemetry" in sys.modules or user_configured_tracing(os.environ):
        return
    os.environ[SDK_SWITCH] = "false"
    try:
        from a2a.utils import telemetry  # reads the switch once, here
    finally:
        del os.environ[SDK_SWITCH]
    # Off, the SDK still wraps each traced call in a no-op span (about 75 calls a request);
    # its modules apply the decorators as they are imported, after this, so none is made.
    telemetry.trace_function = _untraced_function  # type: ignore[assignment]
    telemetry.trace_class = _untraced_class  # type: ignore[assignment]


def _untraced_function(func: Any = None, **_: Any) -> Any:
    """`trace_function` when tracing is off: the function itself, with or without arguments."""
    return func if func is not None else _unchanged


def _untraced_class(*_: Any, **__: Any) -> Any:
    """`trace_class(...)` when tracing is off: the class itself."""
    return _unchanged


def _unchanged(target: Any) -> Any:
    return target
