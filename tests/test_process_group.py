"""A cancel while a command's process starts: the caller goes on at once and the group it
started (the `sleep` behind `sh -c 'sleep 60 & wait'` included) is killed, where asyncio's
own start, cancelled there, would wait on the `sleep` for its whole minute."""

from __future__ import annotations

import asyncio
import gc
import os
import time
from pathlib import Path

import pytest

from raven.process_group import spawn
from tests.processes import ended


async def test_a_cancel_while_the_process_starts_kills_its_group_and_goes_on(
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "pid"
    starting = asyncio.create_task(
        spawn(
            "/bin/sh",
            "-c",
            f"sleep 60 & echo $! > {pidfile}; wait",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
    )
    for _ in range(3):  # into the start: the child exists, its pipes are not connected yet
        await asyncio.sleep(0)
    # Blocking the loop keeps the pipes from connecting while the child starts its sleep.
    deadline = time.monotonic() + 10
    while not (pidfile.exists() and pidfile.read_text().strip()):
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.01)
    assert not starting.done()  # cancelled in the window, not after
    sleeper = int(pidfile.read_text())
    leader = os.getpgid(sleeper)  # the shell, leading the group spawn started
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(asyncio.shield(starting), 5)
    assert await ended([sleeper, leader], 10)
    # The killed shell is reaped too: no zombie, and no transport left open (a warning,
    # an error under this suite's filterwarnings, once collected).
    async with asyncio.timeout(10):
        while Path(f"/proc/{leader}").exists():
            await asyncio.sleep(0.01)
    gc.collect()
