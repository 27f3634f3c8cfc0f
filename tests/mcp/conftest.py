from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from raven.config import McpHttpServer, McpStdioServer

SERVER = Path(__file__).parent / "servers" / "notes_server.py"


def stdio_spec(name: str = "notes", *flags: str, **extra: object) -> McpStdioServer:
    return McpStdioServer(name=name, command=sys.executable, args=[str(SERVER), *flags], **extra)  # type: ignore[arg-type]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        yield McpHttpServer(name="remote", url=f"http://127.0.0.1:{port}/mcp")
    finally:
        proc.terminate()
        proc.wait(10)
