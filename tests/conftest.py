"""Shared fixtures: a private RAVEN_HOME, a fake model server, and the raven command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.fakes.model_server import FakeModelServer

if TYPE_CHECKING:
    from tests.acp_schema import AcpSchema

RAVEN = [sys.executable, "-m", "raven"]
TESTS = Path(__file__).parent


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (the default, in pyproject.toml): twice the cores this process may use, as
    most tests wait on the processes and servers they start rather than compute."""
    return min(2 * len(os.sched_getaffinity(0)), 8)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark what the fast loop (`-m "not slow"`) leaves out: the end-to-end tests (they
    launch `raven` as a user does), the browser and PostgreSQL tests, and the modules
    marked `processes` (they start Raven, agent or server processes)."""
    for item in items:
        if item.path.is_relative_to(TESTS / "e2e"):
            item.add_marker(pytest.mark.e2e)
        if "postgres_server_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)
        if any(
            item.get_closest_marker(kind) for kind in ("e2e", "browser", "postgres", "processes")
        ):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True, scope="session")
def _no_machine_git_config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The tests, and every process they start, see git as on a fresh machine: no system
    or global config, so no identity (and git guesses none), whoever runs them."""
    config = tmp_path_factory.mktemp("git") / "config"
    config.write_text("[user]\n\tuseConfigOnly = true\n", encoding="utf-8")
    saved = {k: v for k, v in os.environ.items() if k.startswith("GIT_")}
    for key in saved:
        del os.environ[key]
    os.environ.update(GIT_CONFIG_GLOBAL=str(config), GIT_CONFIG_NOSYSTEM="1")
    yield
    for key in [k for k in os.environ if k.startswith("GIT_")]:
        del os.environ[key]
    os.environ.update(saved)


@pytest.fixture(autouse=True)
def _no_real_model_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach a paid model API."""
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "RAVEN_CONFIG", "RAVEN_HOME"):
        monkeypatch.delenv(key, raising=False)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def raven_env(home: Path) -> dict[str, str]:
    """Environment for a `raven` subprocess: `home` as its RAVEN_HOME and no model keys."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "RAVEN_CONFIG", "RAVEN_HOME")
    }
    return {**clean, "RAVEN_HOME": str(home), "NO_COLOR": "1", "TERM": "dumb"}


@pytest.fixture
def env(home: Path) -> dict[str, str]:
    return raven_env(home)


def write_config(home: Path, data: dict[str, Any]) -> Path:
    path = home / "config.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def raven(
    *args: str,
    env: dict[str, str],
    input: str = "",
    timeout: float = 60,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `raven ARGS` as a user would, capturing stdout and stderr; stdin is `input`."""
    return subprocess.run(
        [*RAVEN, *args],
        env=env,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


@pytest.fixture
def model_server() -> Iterator[FakeModelServer]:
    server = FakeModelServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_server_url() -> Iterator[str]:
    """One throwaway PostgreSQL server for the whole run, started when a test first needs it."""
    from tests.postgres import postgres_server, require_server

    require_server()
    with postgres_server() as url:
        yield url


@pytest.fixture
def pg_url(postgres_server_url: str) -> Iterator[str]:
    """A fresh, empty database on the shared PostgreSQL server: `postgresql://…`."""
    from tests.postgres import fresh_database

    with fresh_database(postgres_server_url) as url:
        yield url


@pytest.fixture(scope="session")
def acp_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AcpSchema]:
    """The ACP TypeScript SDK's schemas, stable and unstable, read by the SDK itself."""
    from tests.acp_schema import AcpSchema

    reader = AcpSchema(tmp_path_factory)
    yield reader
    reader.close()
