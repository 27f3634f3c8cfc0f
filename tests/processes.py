"""Process and port checks shared by tests (and the benchmarks)."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from pathlib import Path


def alive(pid: int) -> bool:
    """True while the process runs; a zombie awaiting its reaper counts as dead."""
    try:
        os.kill(pid, 0)
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (ProcessLookupError, FileNotFoundError):
        return False
    return state not in ("Z", "X")


def live_pids(where: Callable[[Path, list[str]], bool]) -> list[int]:
    """Pids of the live processes (zombies count as dead) for which `where(its /proc folder,
    the fields of its stat after the name)` holds; one that goes away meanwhile is skipped."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            if fields[0] not in ("Z", "X") and where(proc, fields):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def ended_within(pids: list[int], timeout_s: float = 10) -> bool:
    """True once none of `pids` is alive, waiting up to `timeout_s`: a process killed with
    its group ends a moment after the signal, not at once."""
    deadline = time.monotonic() + timeout_s
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def group_gone(pgid: int) -> bool:
    """True when no live process is left in process group `pgid` (a grandchild reparented
    to an init that reaps slowly lingers as a zombie, which counts as gone)."""
    return not live_pids(lambda _, stat: int(stat[2]) == pgid)


async def pid_from(pidfile: Path, timeout_s: float = 10) -> int:
    """The pid a child wrote to `pidfile`, waiting for it to appear."""
    import asyncio

    async with asyncio.timeout(timeout_s):
        while not (pidfile.exists() and pidfile.read_text().strip()):
            await asyncio.sleep(0.02)
    return int(pidfile.read_text())


def wait_listening(port: int, timeout_s: float = 30) -> None:
    """Until something accepts connections on 127.0.0.1:`port`; AssertionError after
    `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")
