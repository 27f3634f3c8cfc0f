"""A session's life owned by the engine: close and delete stop the running turn and wait for
it, refuse while another process's turn holds the session, and a closed session runs no turn
until it is opened again, in any face."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from raven.engine import (
    AgentText,
    SessionBusy,
    SessionClosed,
    SessionEnded,
    SessionNotFound,
    TurnEnded,
    start_turn,
)
from raven.engine.turn_state import Phase
from tests.engine.conftest import Events, MakeRuntime, RecordingAsker
from tests.engine.test_turn import prompt, turn_started


async def test_closing_stops_the_running_turn_and_a_reopened_session_runs_one_turn_at_a_time(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    runtime = make_runtime([{"text": "slow answer", "wordDelayMs": 30_000}, {"text": "second"}])
    live = await runtime.new_session(tmp_path)
    streaming, heard = asyncio.Event(), Events()
    live.follow(lambda entry: heard.append(entry.event))
    live.follow(lambda e: streaming.set() if isinstance(e.event, AgentText) else None)
    first = start_turn(live, prompt("a"), RecordingAsker(), Events().append)
    await asyncio.wait_for(streaming.wait(), 10)  # the model answers, slowly

    await runtime.close_session(live.id)
    assert first.done() and first.result() == "cancelled"  # stopped, and waited for
    assert heard.of(TurnEnded)[-1].stop_reason == "cancelled" and heard.of(SessionEnded)
    assert (await runtime.get_session(live.id)).closed and live.closed

    with pytest.raises(SessionClosed):  # a face still holding the old session
        start_turn(live, prompt("b"), RecordingAsker(), Events().append)
    with pytest.raises(SessionClosed):  # opened without asking to reopen (gateway, A2A)
        await runtime.open_session(live.id)
    again = await runtime.open_session(live.id, reopen=True)
    assert again is not live and not again.closed
    assert await start_turn(again, prompt("b"), RecordingAsker(), Events().append) == "end_turn"
    roles = [(type(m).__name__, m.text) for m in again.window]
    assert roles == [
        ("UserMessage", "a"),
        ("AssistantMessage", "slow "),  # what it said before it was stopped
        ("UserMessage", "b"),
        ("AssistantMessage", "second"),
    ]


async def test_deleting_stops_the_turn_and_the_old_session_runs_no_more(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    runtime = make_runtime([{"text": "slow", "delayMs": 30_000}])
    live = await runtime.new_session(tmp_path)
    started = turn_started(live)
    first = start_turn(live, prompt("a"), RecordingAsker(), Events().append)
    await asyncio.wait_for(started.wait(), 10)
    assert await runtime.delete_session(live.id) is True
    assert first.done() and first.result() == "cancelled"
    assert (await runtime.list_sessions()).sessions == []
    with pytest.raises(SessionClosed):
        start_turn(live, prompt("b"), RecordingAsker(), Events().append)


@pytest.fixture
def other_process() -> Iterator[int]:
    """A live process that is not this one, to hold a session's turn claim."""
    proc = subprocess.Popen(["sleep", "60"])
    yield proc.pid
    proc.kill()
    proc.wait()


async def test_close_and_delete_refuse_while_another_process_runs_a_turn(
    make_runtime: MakeRuntime, tmp_path: Path, other_process: int
) -> None:
    runtime = make_runtime()
    live = await runtime.new_session(tmp_path)
    runtime.store.db.claim_turn(live.id, other_process)  # SQLite: claimed by that pid
    for refused in (runtime.close_session, runtime.delete_session):
        with pytest.raises(SessionBusy, match=f"pid {other_process}") as caught:
            await refused(live.id)
        assert caught.value.pid == other_process
    record = await runtime.get_session(live.id)  # still there, still open
    assert not record.closed and not live.closed
    runtime.store.db.release_turn(live.id, other_process)
    assert await runtime.delete_session(live.id) is True


async def test_a_turn_goes_from_reserved_to_ended_and_a_cancel_ends_its_wait_for_another(
    make_runtime: MakeRuntime, tmp_path: Path, other_process: int
) -> None:
    runtime = make_runtime([{"text": "slow answer", "wordDelayMs": 30_000}])
    live = await runtime.new_session(tmp_path)
    runtime.store.db.claim_turn(live.id, other_process)  # another Raven's turn runs in it
    waiting = start_turn(live, prompt("a"), RecordingAsker(), Events().append, wait_s=60)
    assert live.phase is Phase.RESERVED and live.is_busy and not live.claimed
    assert live.cancel_turn()  # the person gives up waiting: no minute-long wait
    with pytest.raises(SessionBusy, match=f"pid {other_process}"):
        await asyncio.wait_for(waiting, 10)
    assert live.phase is None and not live.is_busy

    runtime.store.db.release_turn(live.id, other_process)  # the other turn ends
    streaming = asyncio.Event()
    live.follow(lambda e: streaming.set() if isinstance(e.event, AgentText) else None)
    turn = start_turn(live, prompt("b"), RecordingAsker(), Events().append)
    await asyncio.wait_for(streaming.wait(), 10)
    assert live.phase is Phase.WORKING and live.claimed
    assert live.cancel_turn()
    assert live.phase is Phase.STOPPING  # the work is cancelled; the end is being stored
    assert await asyncio.wait_for(turn, 10) == "cancelled"
    assert live.phase is None and not live.claimed
    assert not live.cancel_turn()  # nothing left to stop


async def test_a_session_not_stored_yet_takes_a_model_and_mode_and_keeps_them(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    modes = [{"id": "ask", "name": "Ask"}, {"id": "auto", "name": "Auto", "approvals": "auto"}]
    runtime = make_runtime(modes=modes)
    session = await runtime.new_session(tmp_path, deferred=True)
    await runtime.set_mode(session, "auto")  # as `raven chat`'s /mode before a first message
    await runtime.set_model(session, "echo")
    with pytest.raises(SessionNotFound):  # stored with its first message, not before
        await runtime.store.get(session.id)
    events = Events()
    await start_turn(session, prompt("hi"), RecordingAsker(), events.append)
    stored = await runtime.store.get(session.id)
    assert (stored.mode, stored.model) == ("auto", "echo")


async def test_a_persons_lists_leave_out_the_sessions_a_sub_agent_keeps(
    tmp_path: Path,
) -> None:
    """A sub-agent Raven keeps its sessions in the same store and directory; the lists a
    person reads (an editor's, the web UI's, `--continue`) leave them out."""
    from raven.config import Paths, RavenConfig
    from raven.engine import SUBAGENT_FACE, Runtime

    paths = Paths(config_file=tmp_path / "config.json", data_dir=tmp_path / "data")
    offline = RavenConfig(default_model="echo")
    person = Runtime(offline, paths, face="cli")
    child = Runtime(offline, paths, face=SUBAGENT_FACE)
    try:
        assert await person.latest_session(str(tmp_path)) is None
        mine = await person.new_session(tmp_path)
        for _ in range(3):  # all newer
            await child.new_session(tmp_path)
        assert await person.latest_session(str(tmp_path)) == mine.id
        listed = await person.list_sessions(str(tmp_path))
        assert [r.id for r in listed.sessions] == [mine.id]
        assert len((await person.store.page(str(tmp_path))).sessions) == 4  # all are stored
    finally:
        await child.aclose()
        await person.aclose()
