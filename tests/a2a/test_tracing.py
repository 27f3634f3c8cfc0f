"""The a2a SDK's tracing: off by default, on when the user configures OpenTelemetry."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from raven.a2a.tracing import SDK_SWITCH

pytestmark = pytest.mark.processes  # starts Raven, agent or server processes

PROBE = f"""
import json, os
import raven.a2a
import a2a.utils.telemetry as telemetry
from a2a.server.request_handlers import DefaultRequestHandler
wrapped = DefaultRequestHandler.on_get_task.__code__.co_filename == telemetry.__file__
print(json.dumps({{"tracing": telemetry.otel_enabled, "switch": os.environ.get({SDK_SWITCH!r}),
                  "wrapped": wrapped}}))
"""


def probe(**otel: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | otel
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_without_opentelemetry_settings_the_sdk_does_not_trace_and_the_env_is_untouched() -> None:
    # Commands Raven runs inherit its environment: the switch must not leak into it.
    # Nor are the SDK's calls wrapped in no-op spans (about 75 wrapper calls a request).
    assert probe() == {"tracing": False, "switch": None, "wrapped": False}


@pytest.mark.parametrize(
    "otel",
    [{"OTEL_TRACES_EXPORTER": "otlp"}, {"OTEL_SERVICE_NAME": "raven"}, {SDK_SWITCH: "true"}],
)
def test_a_user_who_configured_opentelemetry_keeps_the_sdk_spans(otel: dict[str, str]) -> None:
    assert probe(**otel) == {"tracing": True, "switch": otel.get(SDK_SWITCH), "wrapped": True}
