from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from raven.config import McpHttpServer, McpStdioServer
from tests.ports import free_port
from tests.processes import wait_listening

SERVER = Path(__file__).parent / "servers" / "notes_server.py"


def stdio_spec(name: str = "notes", *flags: str, **extra: object) -> McpStdioServer:
    return McpStdioServer(name=name, command=sys.executable, args=[str(SERVER), *flags], **extra)  # type: ignore[arg-type]


@pytest.fixture
def http_server() -> Iterator[McpHttpServer]:
    """The notes server over streamable HTTP on a free loopback port."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_listening(port, timeout_s=20)
        yield McpHttpServer(name="remote", url=f"http://127.0.0.1:{port}/mcp")
    finally:
        proc.terminate()
        proc.wait(10)
