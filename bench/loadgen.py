"""What the A2A benchmarks share: the load client, and the tests' port helpers.

Imported by the scripts beside it (`bench/` is on their path when they run).

The client is as cheap as an HTTP/1.1 client can be in Python (one kept-alive connection
per worker, each request written whole, each response read by its length), because with
one client its time adds to every server's round trip alike and pulls their ratio towards
1. aiohttp's client, used before, added about a quarter of a millisecond: the bare aiohttp
handler's round trip took 0.59 ms with it and 0.34 ms with this one (medians of five
alternating rounds in one run). `bench/a2a.py`'s bare handler row shows what it drives.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import statistics
import time
from pathlib import Path
from urllib.parse import urlsplit

from tests.ports import free_port
from tests.processes import wait_listening

__all__ = ["TOKEN", "cpu_s", "free_port", "load", "wait_listening"]

TOKEN = "bench-token-0123456789abcdefghijklmnopqrstuvwxyz"
LATE_S = 30.0
"""How long past `seconds` a run may take (the requests under way finish) before it fails."""


class BadResponse(Exception):
    """The server answered with something this client does not read (no length)."""


async def load(
    url: str, clients: int, seconds: float, total: int | None = None
) -> tuple[float, float, float, int]:
    """(requests/s, p50 ms, p99 ms, errors) for `clients` workers over `seconds`, or until
    `total` requests were answered. Each request is a blocking SendMessage; an error is an
    answer that is not 200 with a completed task."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    head = (
        f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        f"Authorization: Bearer {TOKEN}\r\nA2A-Version: 1.0\r\n"
        "Content-Type: application/json\r\nContent-Length: "
    ).encode()
    latencies: list[float] = []
    errors = 0
    stop_at = time.perf_counter() + seconds

    async def worker(n: int) -> None:
        nonlocal errors
        reader, writer = await asyncio.open_connection(host, port)
        try:
            i = 0
            while time.perf_counter() < stop_at and (total is None or len(latencies) < total):
                body = json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": i,
                        "method": "SendMessage",
                        "params": {
                            "message": {
                                "messageId": f"{n}-{i}",
                                "role": "ROLE_USER",
                                "parts": [{"text": f"hello {n} {i}"}],
                            }
                        },
                    }
                ).encode()
                started = time.perf_counter()
                writer.write(b"%s%d\r\n\r\n%s" % (head, len(body), body))
                status, reply, close = await _response(reader)
                latencies.append(time.perf_counter() - started)
                if status != 200 or b"TASK_STATE_COMPLETED" not in reply:
                    errors += 1
                if close:
                    writer.close()
                    reader, writer = await asyncio.open_connection(host, port)
                i += 1
        finally:
            writer.close()

    began = time.perf_counter()
    async with asyncio.timeout(seconds + LATE_S if math.isfinite(seconds) else None):
        await asyncio.gather(*(worker(n) for n in range(clients)))
    elapsed = time.perf_counter() - began
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return len(latencies) / elapsed, statistics.median(latencies) * 1000, p99 * 1000, errors


async def _response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    """(status, body, whether the server closes the connection) of the next response."""
    lines = (await reader.readuntil(b"\r\n\r\n")).split(b"\r\n")
    status = int(lines[0].split(None, 2)[1])
    length, close = None, False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name, value = name.strip().lower(), value.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"connection":
            close = value == b"close"
    if length is None:  # the servers benchmarked send JSON-RPC answers whole
        raise BadResponse(f"a {status} response without Content-Length")
    return status, await reader.readexactly(length), close


def cpu_s(pid: int) -> float:
    """CPU time `pid` has used so far (user and system, every thread), seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
