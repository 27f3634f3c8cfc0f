"""What every session store does with the tasks kept beside the sessions, the same on
SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from raven.config import Paths, SessionsConfig
from raven.sessions import Sessions, open_sessions
from raven.sessions.tasks import ENDED_EVENTS_KEPT_S, TaskFilter, TaskRow, TaskStale
from tests.sessions.elsewhere import another_process

KINDS = ["sqlite", "postgresql"]
DONE = ["TASK_STATE_COMPLETED", "TASK_STATE_CANCELED"]


@pytest.fixture(params=KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Sessions]:
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    paths = Paths(config_file=tmp_path / "config.json", data_dir=tmp_path / "data")
    opened = open_sessions(SessionsConfig(url=url, lease_s=1.0), paths)
    yield opened
    await opened.aclose()


def row(task_id: str, state: str, when: int, owner: str = "ann", context: str = "c") -> TaskRow:
    return TaskRow(task_id, owner, context, state, when, f"{task_id}:{state}".encode())


async def test_a_write_based_on_an_old_version_is_refused(store: Sessions) -> None:
    assert await store.task_save(row("t", "TASK_STATE_SUBMITTED", 1), 0) == (1, False)
    with pytest.raises(TaskStale):
        await store.task_save(row("t", "TASK_STATE_SUBMITTED", 1), 0)  # a second first
    assert (await store.task_save(row("t", "TASK_STATE_WORKING", 2), 1)).version == 2
    with pytest.raises(TaskStale):  # another writer's late write
        await store.task_save(row("t", "TASK_STATE_COMPLETED", 3), 1)
    found = await store.task_get("t", "ann")
    assert found is not None and found[0].body == b"t:TASK_STATE_WORKING" and found[1] == 2
    assert await store.task_get("t", "bob") is None  # each owner sees only their own
    # A write of two events (an answer and the end) is a version for each, on every store.
    done = row("t", "TASK_STATE_COMPLETED", 3)
    assert (await store.task_save(done, 2, events=[b"answer", b"end"])).version == 4
    with pytest.raises(TaskStale):
        await store.task_save(done, 3)


async def test_an_overwrite_never_changes_an_ended_task(store: Sessions) -> None:
    await store.task_save(row("t", "TASK_STATE_WORKING", 1), 0)
    assert (await store.task_save(row("t", "TASK_STATE_CANCELED", 2), 0, unless=DONE)).version == 2
    with pytest.raises(TaskStale):
        await store.task_save(row("t", "TASK_STATE_CANCELED", 3), 0, unless=DONE)
    with pytest.raises(TaskStale):  # nor makes one up
        await store.task_save(row("gone", "TASK_STATE_CANCELED", 3), 0, unless=DONE)


async def test_pages_are_newest_first_with_totals_for_every_filter(store: Sessions) -> None:
    for n in range(7):
        state = "TASK_STATE_COMPLETED" if n % 2 else "TASK_STATE_WORKING"
        await store.task_save(row(f"t{n}", state, 100 + n, context=f"c{n % 3}"), 0)
    await store.task_save(row("other", "TASK_STATE_WORKING", 500, owner="bob"), 0)
    seen, after = [], None
    while True:
        page = await store.task_page(TaskFilter("ann", after=after), 3)
        assert page.total == 7
        seen += [r.id for r in page.rows]
        if len(page.rows) < 3:
            break
        after = (page.rows[-1].updated_us, page.rows[-1].id)
    assert seen == [f"t{n}" for n in reversed(range(7))]
    working = await store.task_page(TaskFilter("ann", state="TASK_STATE_WORKING"), 10)
    assert [r.id for r in working.rows] == ["t6", "t4", "t2", "t0"] and working.total == 4
    context = await store.task_page(TaskFilter("ann", context_id="c1"), 10)
    assert [r.id for r in context.rows] == ["t4", "t1"] and context.total == 2
    both = TaskFilter("ann", context_id="c0", state="TASK_STATE_COMPLETED")
    assert (await store.task_page(both, 10)).total == 1  # t3
    recent = await store.task_page(TaskFilter("ann", since_us=105), 10)
    assert [r.id for r in recent.rows] == ["t6", "t5"] and recent.total == 2
    # A task that moves on is counted where it is now; a deleted one nowhere.
    await store.task_save(row("t6", "TASK_STATE_COMPLETED", 107, context="c0"), 1)
    await store.task_delete("t5", "ann")
    assert (await store.task_page(TaskFilter("ann", state="TASK_STATE_WORKING"), 10)).total == 3
    assert (await store.task_page(TaskFilter("ann"), 10)).total == 6


async def test_push_configs_and_their_deliveries(store: Sessions) -> None:
    await store.push_set("t", "ann", "a", b"first")  # with its first message: before it
    assert (await store.task_save(row("t", "TASK_STATE_WORKING", 1), 0)).pushes
    await store.push_set("t", "ann", "b", b"second")
    assert await store.push_list("t", "ann") == [b"first", b"second"]
    assert await store.push_list("t", "bob") == []
    assert await store.push_list("t", None) == [b"first", b"second"]
    for _ in range(2):
        await store.delivery_change("t", "a", lambda was: (was or "") + "+")
    assert await store.delivery_get("t") == {"a": "++"}
    await store.push_set("t", "ann", "a", b"again")  # set again: it starts afresh
    assert await store.delivery_get("t") == {}
    await store.push_delete("t", "ann", "b")
    assert await store.push_list("t", None) == [b"again"]
    await store.push_delete("t", "ann", "a")
    assert not (await store.task_save(row("t", "TASK_STATE_WORKING", 2), 1)).pushes
    await store.push_set("t", "ann", "a", b"again")
    await store.task_delete("t", "ann")
    assert await store.push_list("t", None) == []


async def test_a_task_is_run_only_while_its_runner_holds_its_sessions_claim(
    store: Sessions, tmp_path: Path
) -> None:
    """A task has no lease of its own: its runner runs it while it holds the claim of the
    session the task runs in, and a runner that is gone runs nothing."""
    for session_id in ("s-mine", "s-theirs", "s-waiting"):
        await store.create(str(tmp_path), "a2a", session_id=session_id)
    if hasattr(store, "lease_s"):  # claims, not their expiry: never lapsing while it runs
        store.lease_s = 600.0
    await store.claim_turn("s-mine")
    await store.task_save(row("mine", "TASK_STATE_WORKING", 1), 0, runner="s-mine")
    await store.task_save(row("free", "TASK_STATE_WORKING", 1), 0)  # nobody runs it
    await store.task_save(row("theirs", "TASK_STATE_WORKING", 1), 0)
    await store.task_save(row("waiting", "TASK_STATE_SUBMITTED", 1), 0)
    # Off the loop: a write this process just made commits as the loop's step ends.
    other = await asyncio.to_thread(run_from_another_process, store, tmp_path)
    working = ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"]
    try:
        tasks = ["mine", "free", "theirs", "waiting"]
        assert await store.tasks_run_elsewhere(tasks) == {"theirs"}
        unrun = {t.id: t for t in await store.tasks_unrun(working)}
        assert set(unrun) == {"free", "waiting"}
        assert unrun["free"].gone  # none named
        # Its runner lives, waiting for its session's turn: not known to be gone.
        assert not unrun["waiting"].gone and unrun["waiting"].state == "TASK_STATE_SUBMITTED"
        assert unrun["waiting"].version == 2
    finally:
        assert other.stdin is not None and other.stdout is not None
        other.stdin.close()
        other.wait(30)
        other.stdout.close()
    # Its process is gone (without letting go of anything): nobody runs its tasks.
    assert await store.tasks_run_elsewhere(["theirs"]) == set()
    unrun = {t.id: t for t in await store.tasks_unrun(working)}
    assert set(unrun) == {"free", "theirs", "waiting"} and unrun["theirs"].gone
    await store.release_turn("s-mine")  # the turn ended before the task was written
    assert "mine" in {t.id for t in await store.tasks_unrun(working)}
    await store.task_save(row("mine", "TASK_STATE_COMPLETED", 2), 1, final=True)
    [ended] = await store.tasks_unrun(DONE)
    assert ended.id == "mine" and ended.gone  # an ended task has no runner


def run_from_another_process(store: Sessions, tmp_path: Path) -> subprocess.Popen[str]:
    """A process that runs task `theirs` in its session's turn, and has task `waiting`
    wait for another, through a store like `store` until its stdin closes (then exits
    without letting go)."""
    body = (
        '    await store.claim_turn("s-theirs")\n'
        '    row = TaskRow("theirs", "ann", "c", "TASK_STATE_WORKING", 2, b"run")\n'
        '    await store.task_save(row, 1, runner="s-theirs")\n'
        '    row = TaskRow("waiting", "ann", "c", "TASK_STATE_SUBMITTED", 2, b"waits")\n'
        '    await store.task_save(row, 1, runner="s-waiting")\n'
        '    await store.task_get("waiting", "ann")  # committed before it says it is ready'
    )
    return another_process(store, tmp_path, "", body)


async def test_a_task_run_on_another_machine_is_run_while_its_claim_is_renewed(
    pg_url: str, tmp_path: Path
) -> None:
    """A replica on another machine is judged by its session's claim alone: renewed, it
    runs the task; once the claim's lease passed unrenewed, nobody does."""
    import asyncpg

    paths = Paths(config_file=tmp_path / "config.json", data_dir=tmp_path / "data")
    here = open_sessions(SessionsConfig(url=pg_url), paths)
    there = open_sessions(SessionsConfig(url=pg_url), paths)
    there._me = '{"boot": "b", "host": "another-machine", "pid": 1}'  # type: ignore[attr-defined]
    try:
        await there.create(str(tmp_path), "a2a", session_id="s")
        await there.claim_turn("s")
        await there.task_save(row("t", "TASK_STATE_WORKING", 1), 0, runner="s")
        assert await here.tasks_run_elsewhere(["t"]) == {"t"}
        assert await here.tasks_unrun(["TASK_STATE_WORKING"]) == []
        conn = await asyncpg.connect(pg_url)
        try:
            await conn.execute("UPDATE raven_sessions SET turn_until = 0")  # its lease passed
            assert await here.tasks_run_elsewhere(["t"]) == set()
            [unrun] = await here.tasks_unrun(["TASK_STATE_WORKING"])
            assert unrun.id == "t" and not unrun.gone  # another machine's: not known
            assert await there.renew_claims(["s"]) == ["s"]
            assert await here.tasks_run_elsewhere(["t"]) == {"t"}
            assert await here.tasks_unrun(["TASK_STATE_WORKING"]) == []
        finally:
            await conn.close()
    finally:
        await here.aclose()
        await there.aclose()


async def test_a_follower_reading_late_still_sees_every_state_until_the_end_is_old(
    pg_url: str, tmp_path: Path
) -> None:
    """Another replica following a task reads its events when it can: under load, after the
    task ended. The states before the end stay readable for `ENDED_EVENTS_KEPT_S`; then
    any replica's prune lets them go and the end's own event stays."""
    import asyncpg

    paths = Paths(config_file=tmp_path / "config.json", data_dir=tmp_path / "data")
    writer = open_sessions(SessionsConfig(url=pg_url), paths)
    follower = open_sessions(SessionsConfig(url=pg_url), paths)
    try:
        await writer.task_save(row("t", "TASK_STATE_SUBMITTED", 1), 0, events=[b"submitted"])
        await writer.task_save(row("t", "TASK_STATE_WORKING", 2), 1, events=[b"working"])
        done = row("t", "TASK_STATE_COMPLETED", 3)  # its answer, then its end: one write
        saved = await writer.task_save(done, 2, events=[b"answer", b"completed"], final=True)
        assert saved.version == 4  # a version for each event
        events = [b"working", b"answer", b"completed"]
        assert [e for _, e in await follower.task_events("t", 1)] == events
        await follower.task_prune()  # the end is new: nothing goes
        assert [e for _, e in await follower.task_events("t", 1)] == events
        conn = await asyncpg.connect(pg_url)
        try:
            await conn.execute("UPDATE raven_task_ends SET at = at - $1", ENDED_EVENTS_KEPT_S)
        finally:
            await conn.close()
        await follower.task_prune()
        assert await follower.task_events("t", 0) == [(4, b"completed")]
    finally:
        await writer.aclose()
        await follower.aclose()
