"""Free loopback ports for the servers tests start, never the same one for two workers.

A port the kernel hands out for `bind(("127.0.0.1", 0))` is free the moment it is asked,
but it comes from the ephemeral range that outgoing connections also draw from, and two
pytest-xdist workers asking at once can be given the same one before either server has
bound it. So each worker takes ports from a block of its own below the ephemeral range
(Linux's starts at 32768), in turn, skipping any that something else already holds.
Outside xdist (a benchmark, one process) the block is the first. A second run on the same
machine (a stress loop beside your own) sets RAVEN_TEST_PORT_BLOCKS=6 to start six blocks on.
"""

from __future__ import annotations

import itertools
import os
import socket
import threading

FIRST_PORT = 20_000
BLOCK = 1_000
"""Ports per worker: 12 blocks fit below 32768."""

_lock = threading.Lock()
_next = itertools.count()


def _block() -> int:
    """Where this process's block starts: by its xdist worker number (`gw3` → 3)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) if worker.isdigit() else 0
    index += int(os.environ.get("RAVEN_TEST_PORT_BLOCKS", "0"))
    return FIRST_PORT + (index % 12) * BLOCK


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now and that no other worker is given."""
    start = _block()
    for _ in range(BLOCK):
        with _lock:
            port = start + next(_next) % BLOCK
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # held by something else: take the next
        return port
    raise RuntimeError(f"no free port in {start}–{start + BLOCK - 1}")
