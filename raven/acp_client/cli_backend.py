"""A one-shot command-line agent (`claude -p {task}`, say): the task in, stdout out.

`{task}` in the arguments becomes the task as one argument; without it the task
goes to stdin. A non-zero exit is a failure carrying the tail of stderr. The answer
is clipped (head and tail) while it is read, so memory stays bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from raven.acp_client.agent import Outcome, SubAgentError
from raven.acp_client.task import MAX_ANSWER_CHARS
from raven.child_process import ChildProcess, why_not_started
from raven.config import AgentSpec
from raven.sandbox import Sandbox, SandboxUnavailable
from raven.tools import Capped

TASK_PLACEHOLDER = "{task}"
READ_CHUNK = 65536


async def run_cli(spec: AgentSpec, task: str, cwd: Path, sandbox: Sandbox | None = None) -> Outcome:
    """Run the command once on `task`, in `sandbox` when given; its stdout is the answer."""
    via_args = any(TASK_PLACEHOLDER in a for a in spec.args)
    args = [a.replace(TASK_PLACEHOLDER, task) for a in spec.args]
    try:
        child = await ChildProcess.spawn(
            spec.name, spec.command, args, spec.env, cwd, sandbox=sandbox
        )
    except OSError as exc:
        raise SubAgentError(why_not_started(spec.name, spec.command, cwd, exc)) from None
    except SandboxUnavailable as exc:
        raise SubAgentError(f"sub-agent {spec.name} was not started: {exc}") from None
    proc = child.proc
    assert proc.stdin is not None and proc.stdout is not None
    try:
        async with asyncio.timeout(spec.prompt_timeout_s):
            if not via_args:
                # A command that exits without reading its input closes the pipe early.
                with contextlib.suppress(ConnectionError):
                    proc.stdin.write(task.encode())
                    await proc.stdin.drain()
            proc.stdin.close()
            answer = Capped(MAX_ANSWER_CHARS)  # clipped as it is read, whatever it prints
            while chunk := await proc.stdout.read(READ_CHUNK):
                answer.add(chunk)
            code = await proc.wait()
    except TimeoutError:
        raise SubAgentError(
            f"sub-agent {spec.name} did not finish within {spec.prompt_timeout_s:g}s; stopped"
        ) from None
    finally:
        await child.stop()
    if code != 0:
        raise SubAgentError(child.describe_exit())
    return Outcome(answer.text().strip(), "end_turn")
