"""A task has no lease of its own: a replica ends FAILED the tasks nobody runs (their
runner gone, or not holding their session's claim), and leaves alone those whose runner
holds the claim or that wait for their turn. Another machine's replica is played by a
second store naming itself as one."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import asyncpg
from a2a.types import Task, TaskState, TaskStatus

from raven.a2a.service import TaskService
from raven.a2a.store import open_store
from raven.config import A2AServerConfig, Paths, SessionsConfig
from raven.engine.replicas import LAPSED_TURN
from raven.sessions import open_sessions
from raven.sessions.tasks import TaskRow
from tests.engine.conftest import MakeRuntime

ELSEWHERE = '{"boot": "b", "host": "another-machine", "pid": 1}'
HOUR_US = 3600 * 1_000_000
DEADLINE_S = 30


def task_row(task_id: str, state: int, updated_us: int) -> TaskRow:
    task = Task(id=task_id, context_id=f"c-{task_id}", status=TaskStatus(state=state))
    name = TaskState.Name(state)
    return TaskRow(task_id, "ann", task.context_id, name, updated_us, task.SerializeToString())


async def test_tasks_nobody_runs_end_failed_and_the_others_are_left(
    pg_url: str,
    make_runtime: MakeRuntime,
    tmp_path: Path,
) -> None:
    paths = Paths(config_file=tmp_path / "config.json", data_dir=tmp_path / "there")
    there = open_sessions(SessionsConfig(url=pg_url), paths)
    there._me = ELSEWHERE  # type: ignore[attr-defined]
    now_us = time.time_ns() // 1000
    rows = {
        # Its runner holds its session's claim, renewed below: it runs.
        "running": ("s-running", TaskState.TASK_STATE_WORKING, now_us),
        # Its runner's claim lapsed (a replica killed there): the engine ends the turn.
        "lapsed": ("s-lapsed", TaskState.TASK_STATE_WORKING, now_us),
        # Its runner let go of the claim and never wrote the end.
        "let-go": ("s-let-go", TaskState.TASK_STATE_WORKING, now_us),
        # Waits for its turn, as long as a runner waits.
        "waiting": ("s-waiting", TaskState.TASK_STATE_SUBMITTED, now_us),
        # Submitted longer ago than any runner waits: left behind.
        "left": ("s-left", TaskState.TASK_STATE_SUBMITTED, now_us - HOUR_US),
    }
    runtime = make_runtime(sessions={"url": pg_url, "leaseS": 1.5})
    settings = A2AServerConfig.model_validate({"token": "t" * 32, "taskStore": "sessions"})
    store = open_store(settings, runtime.config.sessions, runtime.tasks, runtime.shared)
    service = TaskService(runtime, settings, store, tmp_path / "work")
    try:
        for task_id, (session_id, state, updated_us) in rows.items():
            await there.create(str(tmp_path), "a2a", session_id=session_id)
            if state == TaskState.TASK_STATE_WORKING and task_id != "let-go":
                await there.claim_turn(session_id)
            await there.task_save(task_row(task_id, state, updated_us), 0, runner=session_id)
        conn = await asyncpg.connect(pg_url)
        try:
            await conn.execute("UPDATE raven_sessions SET turn_until = 0 WHERE id = 's-lapsed'")
        finally:
            await conn.close()

        async def states() -> dict[str, str]:
            found = {}
            for task_id in rows:
                stored = await there.task_get(task_id, "ann")
                assert stored is not None
                found[task_id] = stored[0].state
            return found

        ticks: list[dict[str, str]] = []
        ticked = asyncio.Event()

        async def after_each_sweep(lapsed: list[str]) -> None:
            await there.renew_claims(["s-running"])
            ticks.append(await states())
            ticked.set()

        await service.start()  # its first look, before any tick
        first = await states()
        assert first["left"] == "TASK_STATE_FAILED"
        # Working and not run: ended only at a second look (a runner that just let go of
        # its claim writes the task's end meanwhile).
        assert first["let-go"] == first["lapsed"] == "TASK_STATE_WORKING"
        runtime.on_sweep(after_each_sweep)
        async with asyncio.timeout(DEADLINE_S):
            while len(ticks) < 3:
                ticked.clear()
                await ticked.wait()
        assert ticks[0]["let-go"] == ticks[0]["lapsed"] == "TASK_STATE_FAILED"
        for seen in ticks:
            assert seen["running"] == "TASK_STATE_WORKING"
            assert seen["waiting"] == "TASK_STATE_SUBMITTED"
        lapsed = await runtime.get_session("s-lapsed")
        assert lapsed.failure == LAPSED_TURN  # the engine ended the turn, once
    finally:
        await service.aclose()
        await runtime.aclose()
        await there.aclose()
