"""The run_command tool: a shell command in the session cwd, in its own process group.

On timeout or cancellation the whole group is stopped (SIGTERM, then SIGKILL)
within `STOP_GRACE_S` + a moment; if Raven is killed first, `raven.lifeline` kills it.
Output is capped, keeping its head and tail.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pydantic import Field

from raven import lifeline
from raven.process_group import kill_group, spawn
from raven.sandbox import Sandbox, SandboxUnavailable
from raven.tools.base import Args, BuiltinTool, Capped, Preview, ToolContext, ToolOutput

if TYPE_CHECKING:
    from raven.sandbox.confine import Confined

STOP_GRACE_S = 1.0
_READ_CHUNK = 65536


class RunCommandArgs(Args):
    command: str = Field(min_length=1, description="Shell command line, run with /bin/sh -c")
    timeout_s: float | None = Field(
        default=None, gt=0, description="Seconds before the command is killed"
    )


class RunCommand(BuiltinTool):
    name: ClassVar[str] = "run_command"
    description: ClassVar[str] = (
        "Run a shell command in the working directory; returns its combined output and exit code."
    )
    kind = "execute"
    args_model = RunCommandArgs

    def title(self, args: RunCommandArgs, ctx: ToolContext) -> str:
        return f"Run `{args.command}`"

    async def preview(self, args: RunCommandArgs, ctx: ToolContext) -> Preview | None:
        jailed = f"; {ctx.sandbox.shown}" if ctx.sandbox.shown else ""
        return f"$ {args.command}\n(in {ctx.cwd}{jailed})"

    async def run(self, args: RunCommandArgs, ctx: ToolContext) -> ToolOutput:
        timeout_s = min(
            args.timeout_s or ctx.limits.command_timeout_s, ctx.limits.command_timeout_s
        )
        return await run_shell(
            args.command, ctx.cwd, timeout_s, ctx.limits.tool_output_chars, ctx.env, ctx.sandbox
        )


async def run_shell(
    command: str,
    cwd: Path,
    timeout_s: float,
    max_chars: int,
    env: Mapping[str, str] | None = None,
    sandbox: Sandbox | None = None,
) -> ToolOutput:
    """`command` under /bin/sh in `cwd`, in its own process group (stopped on timeout or
    cancellation), in `sandbox` when given: its combined output, head and tail kept,
    and its exit code."""
    try:
        confined = sandbox.confine(cwd) if sandbox is not None else None
    except SandboxUnavailable as exc:
        return ToolOutput(str(exc), is_error=True)
    base = confined.environment(os.environ) if confined is not None else os.environ
    try:
        return await _run(command, cwd, timeout_s, max_chars, env, base, confined)
    finally:
        if confined is not None:
            confined.cleanup()


async def _run(
    command: str,
    cwd: Path,
    timeout_s: float,
    max_chars: int,
    env: Mapping[str, str] | None,
    base: Mapping[str, str],
    confined: Confined | None,
) -> ToolOutput:
    try:
        proc = await spawn(
            "/bin/sh",
            "-c",
            command,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**base, **(env or {}), **lifeline.env()},
            preexec_fn=confined.preexec() if confined else None,
        )
    except subprocess.SubprocessError as exc:  # the kernel refused the sandbox
        return ToolOutput(f"The command was not run: its sandbox failed ({exc}).", is_error=True)
    finally:
        if confined is not None:
            confined.release()
    assert proc.stdout is not None
    collector = Capped(max_chars)
    timed_out = False
    try:
        try:
            async with asyncio.timeout(timeout_s):
                while chunk := await proc.stdout.read(_READ_CHUNK):
                    collector.add(chunk)
                await proc.wait()
        except TimeoutError:
            timed_out = True
    finally:
        if proc.returncode is None:
            await stop_process_group(proc)
    output = collector.text()
    note = f"\n[{confined.note}]" if confined and confined.note else ""
    if timed_out:
        return ToolOutput(
            f"{output}\n[timed out after {timeout_s:g}s; killed]{note}", is_error=True
        )
    code = proc.returncode
    return ToolOutput(f"{output}\n[exit code {code}]{note}".lstrip("\n"), is_error=code != 0)


async def stop_process_group(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the process's group, wait `STOP_GRACE_S`, then SIGKILL it; reap the process."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(asyncio.shield(proc.wait()), STOP_GRACE_S)
    except TimeoutError:
        pass
    # The leader may be gone while others in its group live on; kill the group regardless.
    kill_group(proc.pid)
    await proc.wait()
