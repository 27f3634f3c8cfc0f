"""A throwaway PostgreSQL server on loopback for tests, from the machine's server binaries,
and a fresh database on it for each test that needs one."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.ports import free_port
from tests.processes import program


def server_binaries() -> Path | None:
    """The directory holding initdb and pg_ctl, if a PostgreSQL server is installed."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(versions[-1]).parent if versions else None


def require_server() -> None:
    """Skip without a PostgreSQL server, in one line naming what to install; under .ci/run
    (`RAVEN_TEST_STRICT`) fail instead, since there every test must run."""
    if server_binaries() is None:
        missing = "no PostgreSQL server: apt install postgresql to run the replica tests"
        if os.environ.get("RAVEN_TEST_STRICT"):
            pytest.fail(missing)
        pytest.skip(missing)


@contextmanager
def postgres_server() -> Iterator[str]:
    """Start a throwaway cluster; yields its `postgresql://` URL; stops and removes it."""
    bin_dir = server_binaries()
    assert bin_dir is not None
    as_user: list[str] = []
    # Not under pytest's tmp_path: that is private to root, and the server runs as postgres.
    workdir = Path(tempfile.mkdtemp(prefix="raven-pg-"))
    data = workdir / "pgdata"
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        runuser = program("runuser")
        assert runuser is not None, "PostgreSQL refuses root, and runuser is not installed"
        as_user = [runuser, "-u", "postgres", "--"]
        shutil.chown(workdir, "postgres")
    port = free_port()
    run = lambda *args: subprocess.run(  # noqa: E731
        [*as_user, *args], check=True, capture_output=True, timeout=120
    )
    run(str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres")
    run(
        str(bin_dir / "pg_ctl"),
        "-D",
        str(data),
        "-w",
        "-l",
        str(workdir / "pg.log"),
        "-o",
        f"-p {port} -k {workdir} -c listen_addresses=127.0.0.1 -c fsync=off",
        "start",
    )
    url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    _servers[url.rsplit("/", 1)[0]] = (lambda *args: run(str(bin_dir / "pg_ctl"), *args), data)
    try:
        yield url
    finally:
        _servers.pop(url.rsplit("/", 1)[0], None)
        run(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(workdir, ignore_errors=True)


_servers: dict[str, tuple[Callable[..., Any], Path]] = {}
"""The running servers of this process, by `postgresql://user@host:port`."""


def restart_server(url: str) -> None:
    """Restart the server a database URL is on, as an operator's restart does (`fast`:
    every connection is cut), and return once it takes connections again."""
    pg_ctl, data = _servers[url.rsplit("/", 1)[0]]
    # Its own log file: the server must not hold the pipes of this call open.
    pg_ctl("-D", str(data), "-m", "fast", "-w", "-l", str(data.parent / "restart.log"), "restart")


@contextmanager
def fresh_database(server_url: str) -> Iterator[str]:
    """A new, empty database on the server for one test; dropped after it."""
    bin_dir = server_binaries()
    assert bin_dir is not None
    name = f"t_{uuid.uuid4().hex[:12]}"

    def sql(statement: str) -> None:
        psql = [str(bin_dir / "psql"), server_url, "-q", "-v", "ON_ERROR_STOP=1", "-c"]
        subprocess.run([*psql, statement], check=True, capture_output=True, timeout=60)

    sql(f"CREATE DATABASE {name}")
    try:
        yield server_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        sql(f"DROP DATABASE {name} WITH (FORCE)")
