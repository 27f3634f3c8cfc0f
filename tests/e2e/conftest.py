"""Fixtures the end-to-end tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import raven_env
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


@pytest.fixture(scope="module")
def idle_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[A2AServer]:
    """One `raven a2a serve` (its model echoes, bodies up to 1 MiB) for a module's tests
    that read its card or are answered before any task runs: starting a server is what
    such a test would spend its time on."""
    home = tmp_path_factory.mktemp("idle-server")
    configure(home, max_body_bytes=1024 * 1024)
    server = start(raven_env(home))
    yield server
    assert server.stop() == 0
