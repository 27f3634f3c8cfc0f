"""Process checks shared by tests."""

from __future__ import annotations

import os
from pathlib import Path


def alive(pid: int) -> bool:
    """True while the process runs; a zombie awaiting its reaper counts as dead."""
    try:
        os.kill(pid, 0)
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (ProcessLookupError, FileNotFoundError):
        return False
    return state not in ("Z", "X")


def group_gone(pgid: int) -> bool:
    """True when no live process is left in process group `pgid` (zombies count as dead:
    a grandchild reparented to an init that reaps slowly lingers as one)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return False
    return True


async def pid_from(pidfile: Path, timeout_s: float = 10) -> int:
    """The pid a child wrote to `pidfile`, waiting for it to appear."""
    import asyncio

    async with asyncio.timeout(timeout_s):
        while not (pidfile.exists() and pidfile.read_text().strip()):
            await asyncio.sleep(0.02)
    return int(pidfile.read_text())
