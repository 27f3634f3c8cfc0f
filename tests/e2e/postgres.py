"""A throwaway PostgreSQL server on loopback for tests, from the machine's server binaries."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.mcp.conftest import free_port


def server_binaries() -> Path | None:
    """The directory holding initdb and pg_ctl, if a PostgreSQL server is installed."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(versions[-1]).parent if versions else None


@contextmanager
def postgres_server() -> Iterator[str]:
    """Start a throwaway cluster; yields an SQLAlchemy async URL; stops and removes it."""
    bin_dir = server_binaries()
    assert bin_dir is not None
    as_user: list[str] = []
    # Not under pytest's tmp_path: that is private to root, and the server runs as postgres.
    workdir = Path(tempfile.mkdtemp(prefix="raven-pg-"))
    data = workdir / "pgdata"
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        as_user = ["runuser", "-u", "postgres", "--"]
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
        f"-p {port} -k {workdir} -c listen_addresses=127.0.0.1",
        "start",
    )
    try:
        yield f"postgresql+asyncpg://postgres@127.0.0.1:{port}/postgres"
    finally:
        run(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(workdir, ignore_errors=True)
