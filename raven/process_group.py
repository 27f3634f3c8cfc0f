"""Starting a child in a process group of its own, which the lifeline knows of before the
child runs, and which a cancel can never hang on.

asyncio's `create_subprocess_exec`, cancelled after the child exists but before its
pipes are connected (a window that widens on a loaded machine), kills the child alone
and then waits for every pipe to close. A child's own children (the `sleep` behind
`sh -c 'sleep 60 & wait'`, a sub-agent's tools) inherit those pipes, are not killed,
and hold the cancelled task for as long as they live. `spawn` shields the start
instead: a cancelled caller goes on at once, and the group it started is killed as
soon as it exists.

On Linux the child first waits, in a tiny `sh`, for a `go` on its stdin, which Raven
sends only once `raven.lifeline`'s watcher has the group: a command that drops the
lifeline's mark (`env -i`) is still killed with a SIGKILLed Raven, even one killed
while the command was starting (the child then reads the end of its input and runs
nothing).

Never signals a group it did not start.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import signal
import sys
from collections.abc import Mapping
from typing import Any

from raven import lifeline

_HELD = 'IFS= read -r go && [ "$go" = go ] || exit 125; exec "$@"'
"""Run the program only after Raven's `go` (and never if Raven is gone before it)."""
_watching: set[asyncio.Task[None]] = set()


async def spawn(
    program: str, *args: str, stdin: Any = asyncio.subprocess.DEVNULL, **options: Any
) -> asyncio.subprocess.Process:
    """`asyncio.create_subprocess_exec(program, *args, start_new_session=True, ...)`;
    when the caller is cancelled while it starts, the new group is SIGKILLed once it
    exists and the cancellation goes on without waiting for it. Raises OSError when the
    program cannot be found or run, as asyncio does."""
    held = sys.platform.startswith("linux")
    if held:
        if stdin not in (asyncio.subprocess.PIPE, asyncio.subprocess.DEVNULL):
            raise ValueError("spawn takes stdin=PIPE or DEVNULL: the child's go comes on it")
        found = _found(program, options.get("env"), options.get("cwd"))
        argv: tuple[str, ...] = ("/bin/sh", "-c", _HELD, program, found, *args)
        piped = asyncio.subprocess.PIPE
    else:
        argv, piped = (program, *args), stdin
    starting = asyncio.ensure_future(
        asyncio.create_subprocess_exec(*argv, stdin=piped, start_new_session=True, **options)
    )
    try:
        proc = await asyncio.shield(starting)
    except asyncio.CancelledError:
        starting.add_done_callback(_kill_started)
        raise
    if held:
        _go(proc, keep_stdin=stdin == asyncio.subprocess.PIPE)
    return proc


def _go(proc: asyncio.subprocess.Process, keep_stdin: bool) -> None:
    lifeline.hold(proc.pid)  # the leader's pid is the group's: start_new_session
    assert proc.stdin is not None
    proc.stdin.write(b"go\n")
    if not keep_stdin:
        proc.stdin.close()  # the end of input, as /dev/null gives
    watch = asyncio.ensure_future(_let_go_when_reaped(proc))
    _watching.add(watch)
    watch.add_done_callback(_watching.discard)


async def _let_go_when_reaped(proc: asyncio.subprocess.Process) -> None:
    try:
        await proc.wait()
    finally:
        lifeline.let_go(proc.pid)


def _found(program: str, env: Mapping[str, str] | None, cwd: Any) -> str:
    """Where `program` is, as exec would find it (a path with a slash is taken from
    `cwd`, a name is looked up on the child's PATH); FileNotFoundError or PermissionError
    as asyncio would raise them."""
    if "/" in program:
        path = os.path.join(os.fspath(cwd) if cwd is not None else ".", program)
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
        if os.path.isdir(path) or not os.access(path, os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
        return os.path.abspath(path)
    search = (env if env is not None else os.environ).get("PATH", os.defpath)
    found = shutil.which(program, path=search)
    if found is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
    return found


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
