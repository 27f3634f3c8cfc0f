"""Process and port checks shared by tests (and the benchmarks)."""

from __future__ import annotations

import os
import select
import shutil
import socket
import time
from collections.abc import Callable
from pathlib import Path


def program(name: str) -> str | None:
    """Where the program `name` is: on PATH, or where Debian puts system programs (a
    minimal PATH, such as /usr/bin:/bin, leaves out /usr/sbin, home of runuser and
    haproxy)."""
    found = shutil.which(name)
    if found is not None:
        return found
    for folder in ("/usr/sbin", "/sbin", "/usr/local/sbin"):
        if os.access(f"{folder}/{name}", os.X_OK):
            return f"{folder}/{name}"
    return None


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


def _pidfds(pids: list[int]) -> list[int]:
    """A pidfd for each of `pids` still there (one already reaped has ended); a pidfd is
    readable once its process has ended, a zombie included."""
    fds = []
    for pid in pids:
        try:
            fds.append(os.pidfd_open(pid))
        except ProcessLookupError:
            continue
    return fds


def ended_within(pids: list[int], timeout_s: float = 10) -> bool:
    """True once every one of `pids` has ended, waiting on the processes themselves (their
    pidfds) for at most `timeout_s`; blocks, so async tests await `ended` instead."""
    fds = _pidfds(pids)
    try:
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        pending = set(fds)
        deadline = time.monotonic() + timeout_s
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            for fd, _ in poller.poll(left * 1000):
                pending.discard(fd)
                poller.unregister(fd)
        return True
    finally:
        for fd in fds:
            os.close(fd)


async def ended(pids: list[int], timeout_s: float = 10) -> bool:
    """`ended_within` for async tests: the event loop goes on (the Raven under test may be
    running in it) while it waits on the processes' pidfds."""
    import asyncio

    loop = asyncio.get_running_loop()
    fds = _pidfds(pids)
    waits = []
    for fd in fds:
        done = loop.create_future()
        loop.add_reader(fd, lambda d=done: d.done() or d.set_result(None))
        waits.append(done)
    try:
        async with asyncio.timeout(timeout_s):
            await asyncio.gather(*waits)
        return True
    except TimeoutError:
        return False
    finally:
        for fd in fds:
            loop.remove_reader(fd)
            os.close(fd)


def group_gone(pgid: int) -> bool:
    """True when no live process is left in process group `pgid` (a grandchild reparented
    to an init that reaps slowly lingers as a zombie, which counts as gone)."""
    return not live_pids(lambda _, stat: int(stat[2]) == pgid)


async def pid_from(pidfile: Path, timeout_s: float = 30) -> int:
    """The pid a child wrote to `pidfile`, waiting for it to appear: within `timeout_s`,
    a bound on a start that can pass through a Raven, an MCP server importing its SDK and
    a model turn (10 s was seen to run out at a load of 7 on two cores), never a pause."""
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
