"""Fixtures the end-to-end tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.a2a_server import A2AServer, configure, start
from tests.e2e.webhooks import receiver  # noqa: F401 (a fixture)


@pytest.fixture
def serve(env: dict[str, str], home: Path) -> Iterator[Any]:
    """`raven a2a serve` with the config `configure` writes; stopped cleanly after the test."""
    servers: list[A2AServer] = []

    def launch(steps: list[dict[str, Any]] | None = None, **server: Any) -> A2AServer:
        configure(home, steps, **server)
        servers.append(start(env))
        return servers[-1]

    yield launch
    for server in servers:
        assert server.stop() == 0
