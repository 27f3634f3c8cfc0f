"""A sub-agent's process (an ACP agent, a CLI backend, an A2A agent over stdio): spawned in
its own process group, stderr drained, stopped for good.

Never leaves a child behind: `stop` closes stdin, waits, then TERMs and KILLs the
whole group; if Raven is killed first, `raven.lifeline` kills it and its children.
stderr is read continuously (an unread pipe would stall the child) into the log,
credentials masked, keeping its tail for error reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from raven import lifeline
from raven.config import SUBAGENT_ENV
from raven.jsonrpc import MAX_FRAME_BYTES
from raven.process_group import spawn
from raven.redact import redact
from raven.sandbox import Sandbox

if TYPE_CHECKING:
    from raven.sandbox.confine import Confined

log = logging.getLogger(__name__)

STDERR_TAIL_LINES = 20
STOP_GRACE_S = 2.0
KILL_GRACE_S = 3.0


def why_not_started(name: str, command: str, cwd: Path, exc: OSError) -> str:
    """Why sub-agent `name` could not be started: a working directory that is not there is
    said as such (the system says "No such file or directory" for it, as for a missing
    command)."""
    if not cwd.is_dir():
        return f"sub-agent {name}: its working directory {cwd} does not exist"
    return f"sub-agent {name}: cannot start {command!r}: {exc.strerror}"


class ChildProcess:
    """One running sub-agent process and the tail of what it wrote to stderr."""

    def __init__(
        self, name: str, proc: asyncio.subprocess.Process, confined: Confined | None = None
    ) -> None:
        self.name = name
        self.proc = proc
        self._confined = confined
        self._tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._drain = asyncio.create_task(self._read_stderr())

    @classmethod
    async def spawn(
        cls,
        name: str,
        command: str,
        args: Sequence[str],
        env: Mapping[str, str],
        cwd: Path,
        stdin_data: bool = True,
        sandbox: Sandbox | None = None,
    ) -> ChildProcess:
        """Start `command` in a new process group with the parent's environment, `env`, and
        RAVEN_SUBAGENT=1, in `sandbox` when given (the parent's credential variables then
        left out; those of `env` kept, as configured for it); raises OSError when it cannot
        be started, `SandboxUnavailable` when the kernel cannot hold its sandbox."""
        confined = sandbox.confine(cwd) if sandbox is not None else None
        base = confined.environment(os.environ) if confined is not None else os.environ
        try:
            proc = await spawn(
                command,
                *args,
                stdin=asyncio.subprocess.PIPE if stdin_data else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={**base, **env, SUBAGENT_ENV: "1", **lifeline.env()},
                cwd=cwd,
                limit=MAX_FRAME_BYTES,
                preexec_fn=confined.preexec() if confined else None,
            )
        except BaseException:
            if confined is not None:
                confined.cleanup()
            raise
        if confined is not None:
            confined.release()
        return cls(name, proc, confined)

    @property
    def stderr_tail(self) -> str:
        return "\n".join(self._tail)

    def describe_exit(self) -> str:
        """Why the child is gone, with the tail of its stderr."""
        code = self.proc.returncode
        what = "has stopped" if code is None else f"exited with code {code}"
        tail = self.stderr_tail
        return f"sub-agent {self.name} {what}" + (f"; its stderr ends:\n{tail}" if tail else "")

    async def stop(self) -> None:
        """Close stdin, give the child a moment, then TERM and KILL its process group."""
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        if not await self._exited(STOP_GRACE_S):
            self._signal_group(signal.SIGTERM)
            if not await self._exited(KILL_GRACE_S):
                self._signal_group(signal.SIGKILL)
                await self._exited(KILL_GRACE_S)
        # Anything the child left in its group goes too.
        self._signal_group(signal.SIGKILL)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._drain, KILL_GRACE_S)
        if self._confined is not None:
            self._confined.cleanup()  # its temp directory

    def kill_group(self) -> None:
        self._signal_group(signal.SIGKILL)

    async def _exited(self, timeout_s: float) -> bool:
        try:
            await asyncio.wait_for(self.proc.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    def _signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    async def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        child_log = logging.getLogger(f"raven.subagent.{self.name}")
        while True:
            try:
                line = await self.proc.stderr.readline()
            except (ValueError, asyncio.LimitOverrunError):
                continue  # a line longer than the buffer: skipped, reading goes on
            if not line:
                return
            text = redact(line.decode("utf-8", "replace").rstrip())
            self._tail.append(text[:500])
            child_log.info("%s", text)
