"""What the A2A benchmarks share: the load client, and the tests' port helpers.

Imported by the scripts beside it (`bench/` is on their path when they run).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time

import aiohttp

from tests.mcp.conftest import free_port
from tests.processes import wait_listening

__all__ = ["TOKEN", "free_port", "load", "wait_listening"]

TOKEN = "bench-token-0123456789abcdefghijklmnopqrstuvwxyz"


async def load(
    url: str, clients: int, seconds: float, total: int | None = None
) -> tuple[float, float, float, int]:
    """(requests/s, p50 ms, p99 ms, errors) for `clients` workers over `seconds`, or until
    `total` requests were answered."""
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "A2A-Version": "1.0",
        "Content-Type": "application/json",
    }
    latencies: list[float] = []
    errors = 0
    stop_at = time.perf_counter() + seconds
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def worker(n: int) -> None:
            nonlocal errors
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
                )
                started = time.perf_counter()
                async with http.post(url, data=body, headers=headers) as response:
                    reply = await response.read()
                latencies.append(time.perf_counter() - started)
                if response.status != 200 or b"TASK_STATE_COMPLETED" not in reply:
                    errors += 1
                i += 1

        began = time.perf_counter()
        await asyncio.gather(*(worker(n) for n in range(clients)))
        elapsed = time.perf_counter() - began
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return len(latencies) / elapsed, statistics.median(latencies) * 1000, p99 * 1000, errors
