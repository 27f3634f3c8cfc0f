"""Starting a child: a cancel while it starts kills its group at once, and nothing runs in
a group before the lifeline's watcher knows of it."""

from __future__ import annotations

import asyncio
import gc
import subprocess
import time
from pathlib import Path

import pytest

from raven.process_group import _HELD, spawn
from tests.processes import ended, live_pids


def _held_child(token: str) -> int | None:
    """The pid of the child still waiting for its go, found by `token` in its arguments."""
    held = live_pids(
        lambda proc, _: (
            token.encode() in (cmdline := (proc / "cmdline").read_bytes())
            and b"read -r go" in cmdline
        )
    )
    return held[0] if held else None


async def test_a_cancel_while_the_process_starts_kills_its_group_and_runs_nothing(
    tmp_path: Path,
) -> None:
    ran = tmp_path / "ran"
    starting = asyncio.create_task(
        spawn(
            "/bin/sh",
            "-c",
            f"echo yes > {ran}; sleep 60",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
    )
    for _ in range(3):  # into the start: the child exists, its pipes are not connected yet
        await asyncio.sleep(0)
    # Blocking the loop keeps the start from finishing while the child waits for its go.
    deadline = time.monotonic() + 10
    while (child := _held_child(str(ran))) is None:
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.01)
    assert not starting.done()  # cancelled in the window, not after
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(asyncio.shield(starting), 5)
    assert await ended([child], 10)
    # The killed child is reaped too: no zombie, and no transport left open (a warning,
    # an error under this suite's filterwarnings, once collected).
    async with asyncio.timeout(10):
        while Path(f"/proc/{child}").exists():
            await asyncio.sleep(0.01)
    gc.collect()
    assert not ran.exists()  # it never had its go


def test_a_child_whose_raven_is_gone_before_its_go_runs_nothing(tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    argv = ["/bin/sh", "-c", _HELD, "sh", "/bin/sh", "-c", f"echo yes > {ran}"]
    assert subprocess.run(argv, input=b"", timeout=10).returncode == 125  # end of input
    assert subprocess.run(argv, input=b"nope\n", timeout=10).returncode == 125
    assert not ran.exists()
    assert subprocess.run(argv, input=b"go\n", timeout=10).returncode == 0
    assert ran.read_text() == "yes\n"


async def test_the_program_gets_all_its_input_after_the_go(tmp_path: Path) -> None:
    proc = await spawn(
        "cat", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=tmp_path
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"first line\nsecond\n")
    proc.stdin.close()
    assert await asyncio.wait_for(proc.stdout.read(), 10) == b"first line\nsecond\n"
    assert await proc.wait() == 0


async def test_a_program_that_cannot_run_is_an_os_error_at_once(tmp_path: Path) -> None:
    (tmp_path / "plain.txt").write_text("not a program")
    with pytest.raises(FileNotFoundError, match="no-such-program"):
        await spawn("no-such-program-here", cwd=tmp_path)
    with pytest.raises(FileNotFoundError, match="missing"):
        await spawn("./missing", cwd=tmp_path)
    with pytest.raises(PermissionError, match=r"plain\.txt"):
        await spawn("./plain.txt", cwd=tmp_path)
