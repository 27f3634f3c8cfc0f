"""Two runtimes on one PostgreSQL session store, as two replicas see it: a turn on one is
followed on the other in order from any cursor, session changes reach both, a cancel or a
steer sent through one reaches the turn on the other, and a turn whose replica died is
ended by another."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from raven.engine import (
    AgentText,
    CompactionUpdated,
    CursorExpired,
    LogEvent,
    Logged,
    Runtime,
    SessionBusy,
    SessionEnded,
    TitleChanged,
    ToolCallStarted,
    TurnEnded,
    TurnStarted,
    run_turn,
    start_turn,
)
from raven.engine.replicas import LAPSED_TURN
from raven.messages import (
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    user_text,
)
from raven.providers import StopReason
from tests.engine.conftest import MakeRuntime, RecordingAsker
from tests.engine.test_log import DEADLINE_S, kinds, until
from tests.engine.test_turn import prompt


@pytest.fixture
def replicas(pg_url: str, make_runtime: MakeRuntime) -> Callable[..., Runtime]:
    def make(steps: list[dict[str, object]] | None = None, **config: object) -> Runtime:
        sessions = {"url": pg_url, "leaseS": 1.5}
        return make_runtime(steps, sessions=sessions, **config)

    return make


async def test_a_turn_on_one_replica_is_followed_on_another_in_order_from_any_cursor(
    replicas: Callable[..., Runtime], tmp_path: Path
) -> None:
    a = replicas([{"text": "one two three four", "pauseFor": str(tmp_path / "go on")}])
    b = replicas()
    on_a = await a.new_session(tmp_path)
    on_b = await b.open_session(on_a.id)
    mid: list[Logged] = []
    seen_on_a: list[Logged] = []
    on_a.follow(seen_on_a.append)
    seen_on_b: list[Logged] = []
    streamed = asyncio.Event()

    def watch(entry: Logged) -> None:
        seen_on_b.append(entry)
        if isinstance(entry.event, AgentText) and not streamed.is_set():
            streamed.set()
            mid.append(entry)

    on_b.follow(watch)
    turn = start_turn(on_a, prompt("count"), RecordingAsker(), lambda e: None)
    await streamed.wait()
    assert on_b.running and not on_b.is_busy  # B knows a turn runs, elsewhere
    snapshot = await on_b.snapshot()  # the running turn, as far as B has it
    assert isinstance(snapshot.events()[-1], AgentText)
    (tmp_path / "go on").touch()  # the model streams the rest
    assert await turn == "end_turn"
    await until(lambda: bool(seen_on_b) and isinstance(seen_on_b[-1].event, TurnEnded))
    assert [(e.seq, e.cursor, e.event) for e in seen_on_b] == [
        (e.seq, e.cursor, e.event) for e in seen_on_a
    ]
    assert kinds(seen_on_b)[0] == "TurnStarted" and not on_b.running
    text = "".join(e.event.text for e in seen_on_b if isinstance(e.event, AgentText))
    assert text == "one two three four"
    # A cursor handed out by A resumes on B, and on a third replica opened later.
    resumed: list[Logged] = []
    on_b.follow(resumed.append, after=mid[0].cursor)
    assert resumed == seen_on_b[seen_on_b.index(mid[0]) + 1 :]
    c = replicas()
    on_c = await c.open_session(on_a.id)
    later: list[Logged] = []
    on_c.follow(later.append, after=mid[0].cursor)
    assert [(e.seq, e.event) for e in later] == [(e.seq, e.event) for e in resumed]
    with pytest.raises(CursorExpired):
        on_c.follow(later.append, after=f"{on_a.log.epoch}x.1")


async def test_the_replica_running_a_turn_tells_its_end_only_once_a_next_turn_can_start(
    replicas: Callable[..., Runtime], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The replica's own log read (its NOTIFY) may reach the stored end before the release
    # returns: a UI that heard the end and sent the next turn was told the session is busy.
    a = replicas([{"text": "done"}, {"text": "and again"}])
    on_a = await a.new_session(tmp_path)
    store, shared = a.store, on_a.shared
    assert shared is not None
    end_turn = store.end_turn  # type: ignore[attr-defined]

    async def read_back_first(*args: object) -> object:
        first = await end_turn(*args)
        await shared.catch_up(on_a)  # the read wins the race
        return first

    monkeypatch.setattr(store, "end_turn", read_back_first)
    next_turns: list[asyncio.Task[StopReason] | SessionBusy] = []

    def quiet(event: object) -> None:
        pass

    def at_the_end(entry: Logged) -> None:
        if isinstance(entry.event, TurnEnded) and not next_turns:
            try:
                next_turns.append(
                    start_turn(on_a, prompt("again"), RecordingAsker(), lambda e: None)
                )
            except SessionBusy as exc:
                next_turns.append(exc)

    on_a.follow(at_the_end)
    assert await run_turn(on_a, prompt("go"), RecordingAsker(), lambda e: None) == "end_turn"
    await until(lambda: bool(next_turns))
    assert isinstance(next_turns[0], asyncio.Task), next_turns[0]
    assert await asyncio.wait_for(next_turns[0], DEADLINE_S) == "end_turn"


async def test_a_cursor_from_a_replica_further_along_resumes_on_one_behind(
    replicas: Callable[..., Runtime], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = replicas([{"text": "one two"}])
    b = replicas()
    on_a = await a.new_session(tmp_path)
    on_b = await b.open_session(on_a.id)
    assert on_b.shared is not None
    # B hears of nothing A stores (a notification late under load, or lost).
    monkeypatch.setattr(on_b.shared, "wake", lambda *_, **__: None)
    heard_on_a: list[Logged] = []
    on_a.follow(heard_on_a.append)
    assert await run_turn(on_a, prompt("count"), RecordingAsker(), lambda e: None) == "end_turn"
    mid = next(e for e in heard_on_a if isinstance(e.event, AgentText))
    assert on_b.log.seq < mid.seq  # B's copy is behind the cursor a UI brings from A
    with pytest.raises(CursorExpired):
        on_b.follow(lambda _: None, after=mid.cursor)
    await on_b.reach(mid.cursor)  # what the gateway does before following from a cursor
    resumed: list[Logged] = []
    on_b.follow(resumed.append, after=mid.cursor)
    after_mid = heard_on_a[heard_on_a.index(mid) + 1 :]
    assert [(e.seq, e.event) for e in resumed] == [(e.seq, e.event) for e in after_mid]


async def test_changes_to_a_session_reach_every_replica(
    replicas: Callable[..., Runtime], tmp_path: Path
) -> None:
    modes = [{"id": "plan", "name": "Plan"}, {"id": "code", "name": "Code"}]
    a, b = replicas(modes=modes), replicas(modes=modes)
    on_a = await a.new_session(tmp_path, mode_id="plan")
    on_b = await b.open_session(on_a.id)
    heard: list[LogEvent] = []
    on_a.follow(lambda entry: heard.append(entry.event))
    await b.set_mode(on_b, "code")
    await b.rename_session(on_a.id, "Release notes")
    await until(lambda: on_a.mode is not None and on_a.mode.id == "code")
    await until(lambda: on_a.record.title == "Release notes")
    await b.close_session(on_a.id)
    await until(lambda: on_a.closed)
    assert isinstance(heard[-1], SessionEnded) and a.live(on_a.id) is None


async def test_what_another_replica_writes_while_this_one_writes_is_read_after(
    replicas: Callable[..., Runtime], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's word of another replica's event can come while this replica waits for
    its own write's answer (which numbers its events, so it reads nothing back then): the
    event is read once the write is done, not lost."""
    a = replicas([{"text": "done"}])
    b = replicas()
    on_a = await a.new_session(tmp_path)
    on_b = await b.open_session(on_a.id)
    shared = on_a.shared
    assert shared is not None
    seen_on_a: list[Logged] = []
    on_a.follow(seen_on_a.append)
    end_turn = a.store.end_turn  # type: ignore[attr-defined]
    stored, answer = asyncio.Event(), asyncio.Event()
    heads: list[int] = []

    async def answered_late(session_id: str, failure: str | None, rows: list[object]) -> object:
        first = await end_turn(session_id, failure, rows)  # the turn's end is stored...
        heads.append(first + len(rows) - 1)
        stored.set()
        await answer.wait()  # ...and the answer saying so is slow to come
        return first

    monkeypatch.setattr(a.store, "end_turn", answered_late)
    turn = start_turn(on_a, prompt("go"), RecordingAsker(), lambda e: None)
    await asyncio.wait_for(stored.wait(), DEADLINE_S)
    await b.rename_session(on_b.id, "Renamed on B")  # numbered after A's turn
    await until(lambda: shared._heard.get(on_a.id, 0) > heads[0])  # heard while it waits
    answer.set()
    assert await turn == "end_turn"
    await until(lambda: on_a.record.title == "Renamed on B")
    assert isinstance(seen_on_a[-1].event, TitleChanged)
    assert [e.seq for e in seen_on_a] == list(range(1, len(seen_on_a) + 1))  # none lost


async def test_a_cancel_and_a_steer_sent_through_one_replica_reach_the_turn_on_another(
    replicas: Callable[..., Runtime], tmp_path: Path
) -> None:
    a = replicas(
        [
            {
                "toolCalls": [{"name": "list_dir", "arguments": {}}],
                "waitFor": str(tmp_path / "gate"),
            },
            {"text": "looked, and the tests too"},
            {"text": "never said", "delayMs": 5000},
        ]
    )
    b = replicas()
    on_a = await a.new_session(tmp_path)
    await b.open_session(on_a.id)
    listed = asyncio.Event()
    turn = start_turn(
        on_a,
        prompt("look around"),
        RecordingAsker(),
        lambda e: listed.set() if isinstance(e, ToolCallStarted) else None,
    )
    await until(lambda: on_a.claimed)
    assert await b.steer(on_a.id, "check the tests too")

    def took_it() -> bool:
        """A took the steer from its inbox (NOTIFY): it waits for the next model call or,
        come before the first one, is in the transcript already."""
        said = [m.text for m in on_a.window if isinstance(m, UserMessage)]
        return on_a.has_steering() or "check the tests too" in said

    await until(took_it)
    (tmp_path / "gate").touch()  # and only now does the model answer
    assert await turn == "end_turn"
    said = [m.text for m in on_a.window if m.role == "user"]  # type: ignore[union-attr]
    assert said == ["look around", "check the tests too"]

    slow = start_turn(on_a, prompt("take your time"), RecordingAsker(), lambda e: None)
    await until(lambda: on_a.claimed)
    assert await b.cancel_turn(on_a.id)
    assert await asyncio.wait_for(slow, DEADLINE_S) == "cancelled"
    assert not await b.cancel_turn(on_a.id)  # nothing runs any more
    assert not await b.steer(on_a.id, "too late")


async def test_a_turn_whose_replica_died_is_ended_by_another(
    replicas: Callable[..., Runtime], tmp_path: Path, pg_url: str
) -> None:
    b = replicas()
    record = await b.store.create(str(tmp_path), face="test", model="test")
    await b.store.append(record.id, user_text("run the build"))
    calls = [ToolCall(id="k1", name="run_command", arguments={"command": "make"})]
    await b.store.append(record.id, AssistantMessage(tool_calls=calls))
    on_b = await b.open_session(record.id)
    heard: list[LogEvent] = []
    on_b.follow(lambda entry: heard.append(entry.event))
    dead = claim_and_die(pg_url, tmp_path, record.id)
    assert dead > 0
    await until(lambda: any(isinstance(e, TurnEnded) for e in heard))
    (end,) = [e for e in heard if isinstance(e, TurnEnded)]
    assert end.error == LAPSED_TURN
    assert (await b.get_session(record.id)).failure == LAPSED_TURN
    stored = await b.store.messages(record.id)
    assert isinstance(stored[-1], ToolResultMessage) and stored[-1].call_id == "k1"
    # The session is free again: a turn runs there, on the full transcript.
    await on_b.catch_up()
    assert await run_turn(on_b, prompt("again"), RecordingAsker(), lambda e: None) == "end_turn"
    assert isinstance((await on_b.snapshot()).events()[0], TurnStarted)


def claim_and_die(url: str, tmp_path: Path, session_id: str) -> int:
    """A process that claims the session's turn, then is killed (SIGKILL): its pid."""
    script = """
import asyncio, os, sys
from pathlib import Path
from raven.config import Paths, SessionsConfig
from raven.sessions import open_sessions

async def main(url, data, session_id):
    paths = Paths(config_file=Path(data) / "config.json", data_dir=Path(data))
    store = open_sessions(SessionsConfig(url=url), paths)
    await store.claim_turn(session_id)
    print("claimed", flush=True)
    await asyncio.sleep(60)

asyncio.run(main(*sys.argv[1:]))
"""
    argv = [sys.executable, "-c", script, url, str(tmp_path / "dying"), session_id]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "claimed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        proc.stdout.close()
    return proc.pid


async def test_opening_a_session_on_another_replica_never_answers_a_running_tool_call(
    replicas: Callable[..., Runtime], tmp_path: Path
) -> None:
    command = {"name": "run_command", "arguments": {"command": "sleep 0.3; echo done"}}
    a = replicas([{"toolCalls": [command]}, {"text": "ran it"}])
    b = replicas()
    on_a = await a.new_session(tmp_path)
    started = asyncio.Event()

    def heard(event: object) -> None:
        if isinstance(event, ToolCallStarted):
            started.set()

    turn = start_turn(on_a, prompt("run it"), RecordingAsker(), heard, approvals="auto")
    await started.wait()
    await b.open_session(on_a.id)  # its history ends in a call A is still running
    assert await turn == "end_turn"
    results = [m for m in await b.store.messages(on_a.id) if isinstance(m, ToolResultMessage)]
    assert len(results) == 1 and "done" in results[0].content


async def test_a_compaction_on_one_replica_is_the_windows_start_on_the_other(
    replicas: Callable[..., Runtime], tmp_path: Path
) -> None:
    """Replica A compacts the session near its model's window; B, taking the next turn,
    reads only the window from the compaction on, heard the compaction in the log, and
    its model sees A's summary."""
    steps: list[dict[str, object]] = [
        {"text": "First."},
        {"text": "The user sent two long notes about plums."},
        {"text": "Second."},
        {"text": "Fourth."},
        {"text": "Third."},
    ]
    (tmp_path / "a.json").write_text(json.dumps(steps[:3]))
    (tmp_path / "b.json").write_text(json.dumps(steps[3:]))

    def model(script: str) -> dict[str, object]:
        spec = {"provider": "scripted", "script": str(tmp_path / script), "contextWindow": 20_000}
        return {"models": [{"id": "test", **spec}]}

    a, b = replicas(**model("a.json")), replicas(**model("b.json"))
    on_a = await a.new_session(tmp_path)
    on_b = await b.open_session(on_a.id)
    heard: list[Logged] = []
    on_b.follow(heard.append)
    for said in ("plums " * 6_700, "more plums " * 2_800):
        assert await run_turn(on_a, prompt(said), RecordingAsker(), lambda e: None) == "end_turn"
    await until(lambda: sum(isinstance(e.event, TurnEnded) for e in heard) == 2)
    assert "CompactionUpdated" in kinds(heard)
    assert await run_turn(on_b, prompt("and now"), RecordingAsker(), lambda e: None) == "end_turn"
    assert on_b.summary == "The user sent two long notes about plums."
    assert on_b.window_start == 2  # the second turn on: the first is in the summary
    assert [m.text for m in on_b.model_messages() if isinstance(m, UserMessage)] == [
        "more plums " * 2_800,
        "and now",
    ]
    # Asked for on B, a compaction reaches A's followers without a turn's end of its own.
    heard_on_a: list[Logged] = []
    on_a.follow(heard_on_a.append)
    asked = await b.compact(on_b)
    assert asked.status == "completed" and asked.summary == "Third."
    await until(lambda: [e for e in heard_on_a if e.event == asked])
    (first,) = [
        e.seq
        for e in heard_on_a
        if e.event
        == CompactionUpdated(asked.compaction_id, "in_progress", tokens_before=asked.tokens_before)
    ]
    assert not [e for e in heard_on_a if e.seq > first and isinstance(e.event, TurnEnded)]


async def test_a_session_made_for_the_turn_that_follows_is_stored_claimed_for_that_turn(
    pg_url: str, make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    """A session whose first turn follows at once (`turn_follows`, as A2A makes a new
    conversation's) is stored claimed by its replica, in the one statement that stores it:
    the turn takes that claim as its own and lets it go as it ends; a claim no turn took
    is let go with the session, not held until its lease runs out."""
    import asyncpg

    runtime = make_runtime([{"text": "first"}], sessions={"url": pg_url, "leaseS": 60})
    db = await asyncpg.connect(pg_url)

    async def holder(session_id: str) -> object:
        return await db.fetchval("SELECT turn_holder FROM raven_sessions WHERE id = $1", session_id)

    try:
        made = await runtime.new_session(tmp_path, deferred=True, turn_follows=True)
        assert await holder(made.id) is not None  # claimed before any turn asked
        assert await run_turn(made, prompt("go"), RecordingAsker(), lambda e: None) == "end_turn"
        assert await holder(made.id) is None
        assert [m.role for m in await runtime.store.messages(made.id)] == ["user", "assistant"]

        unused = await runtime.new_session(tmp_path, deferred=True, turn_follows=True)
        assert await holder(unused.id) is not None
        runtime.release(unused.id)  # no turn came (an A2A task refused, say)
        async with asyncio.timeout(DEADLINE_S):  # its lease would hold it a minute
            while await holder(unused.id) is not None:
                await asyncio.sleep(0.02)
    finally:
        await db.close()
