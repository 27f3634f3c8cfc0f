"""Starting a child in a process group of its own so that a cancel can never hang on it.

asyncio's `create_subprocess_exec`, cancelled after the child exists but before its
pipes are connected (a window that widens on a loaded machine), kills the child alone
and then waits for every pipe to close. A child's own children (the `sleep` behind
`sh -c 'sleep 60 & wait'`, a sub-agent's tools) inherit those pipes, are not killed,
and hold the cancelled task for as long as they live. `spawn` shields the start
instead: a cancelled caller goes on at once, and the group it started is killed as
soon as it exists.

Never signals a group it did not start; imports no other part of Raven.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Any


async def spawn(program: str, *args: str, **options: Any) -> asyncio.subprocess.Process:
    """`asyncio.create_subprocess_exec(program, *args, start_new_session=True, **options)`;
    when the caller is cancelled while it starts, the new group is SIGKILLed once it
    exists and the cancellation goes on without waiting for it."""
    starting = asyncio.ensure_future(
        asyncio.create_subprocess_exec(program, *args, start_new_session=True, **options)
    )
    try:
        return await asyncio.shield(starting)
    except asyncio.CancelledError:
        starting.add_done_callback(_kill_started)
        raise


def _kill_started(starting: asyncio.Future[asyncio.subprocess.Process]) -> None:
    if starting.cancelled() or starting.exception() is not None:
        return  # nothing started (its error is read here, so never reported unretrieved)
    proc = starting.result()
    kill_group(proc.pid)
    # As asyncio's own cancelled start does: the transport is closed (its pipes too), so
    # nothing is left open whenever the process is reaped (asyncio's child watcher does).
    proc._transport.close()  # type: ignore[attr-defined]


def kill_group(pgid: int) -> None:
    """SIGKILL process group `pgid`, if it still has a member."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
