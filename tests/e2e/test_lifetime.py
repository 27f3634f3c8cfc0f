"""Nothing Raven starts outlives a SIGKILL of Raven: commands (and their own children),
MCP servers, sub-agents and a sub-agent's commands."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from tests.conftest import RAVEN, write_config
from tests.e2e.test_mcp import server_entry
from tests.processes import alive, ended, pid_from

DEADLINE_S = 20


def command_step(pids: Path) -> dict[str, object]:
    """A command whose shell and background child each write their pid, then wait."""
    command = f"echo $$ > {pids}.sh; sleep 300 & echo $! > {pids}.bg; wait"
    return {"toolCalls": [{"name": "run_command", "arguments": {"command": command}}]}


async def command_pids(pids: Path) -> list[int]:
    """The shell's and its background child's pids, once the command wrote them."""
    return [await pid_from(Path(f"{pids}.{k}")) for k in ("sh", "bg")]


@contextlib.asynccontextmanager
async def launched(
    env: dict[str, str], cwd: Path, *args: str, stdin: int = asyncio.subprocess.DEVNULL
) -> AsyncIterator[asyncio.subprocess.Process]:
    """`raven ARGS`, killed on the way out if the test left it running."""
    proc = await asyncio.create_subprocess_exec(
        *RAVEN, *args, env=env, cwd=cwd, stdin=stdin,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def kill_9_and_see_gone(proc: asyncio.subprocess.Process, *pids: int) -> None:
    """SIGKILL `proc` (no end of input or signal it could act on); `pids` must end."""
    assert all(alive(pid) for pid in pids)
    proc.kill()
    await proc.wait()
    assert await ended(list(pids), DEADLINE_S)


async def test_sigkill_of_raven_run_takes_its_command_tree_and_mcp_servers(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    pids = tmp_path / "cmd"
    (home / "script.json").write_text(json.dumps([command_step(pids), {"text": "done"}]))
    write_config(
        home,
        {
            "models": [{"id": "s", "provider": "scripted", "script": "script.json"}],
            "mcpServers": [server_entry("notes", "--pidfile", str(tmp_path / "mcp.pid"))],
        },
    )
    async with launched(env, tmp_path, "run", "--yes", "go") as proc:
        children = [*await command_pids(pids), await pid_from(tmp_path / "mcp.pid")]
        await kill_9_and_see_gone(proc, *children)


async def test_sigkill_of_raven_takes_a_command_that_cleared_its_environment(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    """`env -i` drops the lifeline's mark: the command's process group is what ends it."""
    pids = tmp_path / "cmd"
    command = f"exec env -i sh -c 'echo $$ > {pids}.sh; sleep 300 & echo $! > {pids}.bg; wait'"
    steps = [{"toolCalls": [{"name": "run_command", "arguments": {"command": command}}]}]
    (home / "script.json").write_text(json.dumps([*steps, {"text": "done"}]))
    write_config(home, {"models": [{"id": "s", "provider": "scripted", "script": "script.json"}]})
    async with launched(env, tmp_path, "run", "--yes", "go") as proc:
        children = await command_pids(pids)
        for pid in children:  # unmarked, as a command under `env -i` is
            assert b"RAVEN_LIFELINE" not in Path(f"/proc/{pid}/environ").read_bytes()
        await kill_9_and_see_gone(proc, *children)


async def test_sigkill_of_raven_takes_a_sub_agent_and_the_sub_agents_commands(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    pids = tmp_path / "cmd"
    (tmp_path / "child-script.json").write_text(json.dumps([command_step(pids), {"text": "ok"}]))
    child = tmp_path / "child.json"
    child.write_text(
        json.dumps(
            {
                "models": [
                    {
                        "id": "s",
                        "provider": "scripted",
                        "script": str(tmp_path / "child-script.json"),
                    }
                ]
            }
        )
    )
    agent = {
        "name": "helper",
        "command": sys.executable,
        "args": [*RAVEN[1:], "acp", "--config", str(child)],
    }
    write_config(home, {"defaultModel": "echo", "agents": [agent]})
    async with launched(env, tmp_path, "agents", "run", "helper", "go") as proc:
        commands = await command_pids(pids)
        sub_agent = int(Path(f"/proc/{commands[0]}/stat").read_text().rsplit(")", 1)[1].split()[1])
        assert sub_agent != proc.pid  # the command's parent is the sub-agent
        await kill_9_and_see_gone(proc, sub_agent, *commands)


async def test_sigkill_of_raven_acp_takes_its_command_tree(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    pids = tmp_path / "cmd"
    (home / "script.json").write_text(json.dumps([command_step(pids), {"text": "done"}]))
    write_config(
        home,
        {
            "models": [{"id": "s", "provider": "scripted", "script": "script.json"}],
            "modes": [{"id": "auto", "name": "Auto", "approvals": "auto"}],
        },
    )
    frames = [
        {"id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {"id": 2, "method": "session/new", "params": {"cwd": str(tmp_path), "mcpServers": []}},
    ]
    async with launched(env, tmp_path, "acp", stdin=asyncio.subprocess.PIPE) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        for frame in frames:
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", **frame}).encode() + b"\n")
        session_id = None
        while session_id is None:
            reply = json.loads(await asyncio.wait_for(proc.stdout.readline(), DEADLINE_S))
            session_id = reply.get("result", {}).get("sessionId")
        prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}
        request = {"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": prompt}
        proc.stdin.write(json.dumps(request).encode() + b"\n")
        await kill_9_and_see_gone(proc, *await command_pids(pids))


async def test_after_a_normal_exit_what_a_command_left_running_is_left_alone(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    """Only a Raven that was killed takes its children with it: a server a command started
    in the background on purpose outlives a `raven run` that finished."""
    command = f"sleep 300 > /dev/null 2>&1 & echo $! > {tmp_path}/daemon.pid"
    step = {"toolCalls": [{"name": "run_command", "arguments": {"command": command}}]}
    (home / "script.json").write_text(json.dumps([step, {"text": "started"}]))
    write_config(home, {"models": [{"id": "s", "provider": "scripted", "script": "script.json"}]})
    async with launched(env, tmp_path, "run", "--yes", "start it") as proc:
        assert await asyncio.wait_for(proc.wait(), DEADLINE_S) == 0
    daemon = await pid_from(tmp_path / "daemon.pid")
    try:
        environ = Path(f"/proc/{daemon}/environ").read_bytes().split(b"\0")
        (mark,) = [v.split(b"=", 1)[1] for v in environ if v.startswith(b"RAVEN_LIFELINE=")]
        async with asyncio.timeout(DEADLINE_S):  # Raven's watcher, told goodbye, has gone
            while any(mark in cmdline for cmdline in command_lines()):
                await asyncio.sleep(0.05)
        assert alive(daemon)
    finally:
        os.kill(daemon, signal.SIGKILL)


def command_lines() -> list[bytes]:
    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                lines.append((entry / "cmdline").read_bytes())
    return lines
