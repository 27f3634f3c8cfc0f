"""Two processes on one session: the history stays fresh and turns never interleave."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
from pathlib import Path

import pytest

from raven.config import Paths, RavenConfig
from raven.engine import Runtime, SessionBusy, run_turn
from raven.messages import TextPart, UserMessage
from tests.conftest import RAVEN, raven, write_config
from tests.engine.conftest import RecordingAsker

pytestmark = pytest.mark.processes  # starts Raven, agent or server processes

DEADLINE_S = 20


def runtime_for(home: Path) -> Runtime:
    config = RavenConfig.model_validate({"defaultModel": "echo"})
    return Runtime(config, Paths(home / "config.json", home / "data"), face="test")


async def test_a_turn_sees_what_another_process_wrote_since(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    runtime = runtime_for(home)
    try:
        session = await runtime.new_session(tmp_path)
        await run_turn(session, [TextPart(text="first")], RecordingAsker(), lambda e: None)
        other = raven("run", "-s", session.id, "from the other process", env=env, cwd=tmp_path)
        assert other.returncode == 0, other.stderr
        await run_turn(session, [TextPart(text="third")], RecordingAsker(), lambda e: None)
        prompts = [m.text for m in session.window if isinstance(m, UserMessage)]
        stored = await runtime.store.messages(session.id)
    finally:
        await runtime.aclose()
    assert prompts == ["first", "from the other process", "third"]
    assert [m.text for m in stored if isinstance(m, UserMessage)] == prompts
    assert len(stored) == 6


async def test_a_turn_running_in_another_process_is_refused_until_it_ends(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    session_id, busy = await slow_turn_elsewhere(env, home, tmp_path)
    try:
        holder = await _claim_holder(home, session_id)
        assert holder == busy.pid
        refused = raven("run", "--model", "echo", "-s", session_id, "me too", env=env)
        assert refused.returncode == 1
        assert f"another Raven process, pid {busy.pid}" in refused.stderr
        runtime = runtime_for(home)
        try:
            live = await runtime.open_session(session_id)
            with pytest.raises(SessionBusy):
                await run_turn(live, [TextPart(text="x")], RecordingAsker(), lambda e: None)
        finally:
            await runtime.aclose()
        busy.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(busy.wait(), DEADLINE_S) == 143
    finally:
        if busy.returncode is None:
            busy.kill()
            await busy.wait()
    after = raven("run", "--model", "echo", "-s", session_id, "now", env=env)
    assert after.returncode == 0 and after.stdout.strip() == "now"


async def test_a_claim_left_by_a_killed_process_is_taken_over(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    session_id, doomed = await slow_turn_elsewhere(env, home, tmp_path)
    try:
        assert await _claim_holder(home, session_id) == doomed.pid
    finally:
        doomed.kill()
        await asyncio.wait_for(doomed.wait(), DEADLINE_S)
    after = raven("run", "--model", "echo", "-s", session_id, "recovered", env=env)
    assert after.returncode == 0 and after.stdout.strip() == "recovered"


async def slow_turn_elsewhere(
    env: dict[str, str], home: Path, tmp_path: Path
) -> tuple[str, asyncio.subprocess.Process]:
    """A new session, and a `raven run` in it whose scripted model takes a minute."""
    (home / "script.json").write_text(json.dumps([{"text": "slow", "delayMs": 60_000}]))
    write_config(home, {"models": [{"id": "s", "provider": "scripted", "script": "script.json"}]})
    runtime = runtime_for(home)
    session = await runtime.new_session(tmp_path)
    await runtime.aclose()
    proc = await asyncio.create_subprocess_exec(
        *RAVEN,
        "run",
        "--model",
        "s",
        "-s",
        session.id,
        "take your time",
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    return session.id, proc


async def _claim_holder(home: Path, session_id: str) -> int:
    """The pid that claimed the session, once one has (waiting on the store's state)."""
    async with asyncio.timeout(DEADLINE_S):
        while True:
            db = sqlite3.connect(home / "data" / "raven.db")
            try:
                row = db.execute(
                    "SELECT turn_pid FROM sessions WHERE id = ?", (session_id,)
                ).fetchone()
            finally:
                db.close()
            if row and row[0]:
                return int(row[0])
            await asyncio.sleep(0.05)
