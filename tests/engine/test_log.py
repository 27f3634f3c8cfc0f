"""A session's ordered event log: every event once, numbered, whichever face runs the turn;
followed from a cursor with no gap and no duplicate; a snapshot that shows a running
turn's streamed text before it is stored; cursors that expire instead of lying."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from raven.engine import (
    AgentText,
    CursorExpired,
    Logged,
    Runtime,
    TitleChanged,
    TurnEnded,
    TurnStarted,
    run_turn,
    start_turn,
)
from raven.engine import log as event_log
from raven.messages import TextPart
from tests.engine.conftest import Events, MakeRuntime, RecordingAsker
from tests.engine.test_turn import prompt

DEADLINE_S = 10


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(DEADLINE_S):
        while not condition():
            await asyncio.sleep(0.01)


def runs_joined(events: list[Any]) -> list[Any]:
    """`events` with each run of text as one event."""
    joined: list[Any] = []
    for event in events:
        if isinstance(event, AgentText) and joined and isinstance(joined[-1], AgentText):
            joined[-1] = AgentText(joined[-1].text + event.text)
        else:
            joined.append(event)
    return joined


def kinds(entries: list[Logged]) -> list[str]:
    return [type(e.event).__name__ for e in entries]


async def test_every_event_is_logged_once_in_order_and_a_failing_listener_is_dropped(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    runtime = make_runtime(modes=[{"id": "a", "name": "A"}, {"id": "b", "name": "B"}])
    session = await runtime.new_session(tmp_path)
    first: list[Logged] = []
    second: list[Logged] = []

    def broken(entry: Logged) -> None:
        raise RuntimeError("this listener went away")

    session.follow(first.append)
    session.follow(broken)
    stop_second = session.follow(second.append)
    emitted = Events()
    assert await run_turn(session, prompt("hello"), RecordingAsker(), emitted.append) == "end_turn"
    await runtime.set_mode(session, "b")
    stop_second()
    await runtime.set_model(session, "echo")
    await runtime.close_session(session.id)

    assert [e.seq for e in first] == list(range(1, len(first) + 1))
    assert kinds(first) == [
        "TurnStarted",
        "TitleChanged",
        "AgentText",
        "UsageUpdated",
        "TurnEnded",
        "ModeChanged",
        "ModelChanged",
        "SessionEnded",
    ]
    # The face running the turn got the same turn events, each once, in the same order.
    assert [e.event for e in first[1:5]] == list(emitted)
    assert first[0].event == TurnStarted((TextPart(text="hello"),))
    assert second == first[:6]


async def test_a_follower_from_a_cursor_mid_turn_gets_the_rest_with_no_gap_or_duplicate(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    runtime = make_runtime([{"text": "one two three four five six", "wordDelayMs": 20}])
    session = await runtime.new_session(tmp_path)
    everything: list[Logged] = []
    session.follow(everything.append)
    turn = start_turn(session, prompt("count"), RecordingAsker(), Events().append)
    await until(lambda: any(isinstance(e.event, AgentText) for e in everything))

    cut = len(everything)
    seen = everything[-1].cursor  # a UI that saw this much, then lost its connection
    await until(lambda: len(everything) >= cut + 2)
    resumed: list[Logged] = []
    session.follow(resumed.append, after=seen)
    replayed = len(resumed)
    await turn

    assert replayed >= 2  # what it missed came at once ...
    assert resumed == everything[cut:]  # ... then the rest live: every event once, in order
    assert isinstance(resumed[-1].event, TurnEnded)


async def test_a_snapshot_mid_turn_shows_the_streamed_text_before_it_is_stored(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    runtime = make_runtime(
        [{"text": "earlier answer"}, {"text": "partial then a long wait", "wordDelayMs": 30_000}]
    )
    session = await runtime.new_session(tmp_path)
    assert await run_turn(session, prompt("first"), RecordingAsker(), Events().append)
    texts: list[str] = []
    session.follow(lambda e: texts.append(e.event.text) if isinstance(e.event, AgentText) else 0)
    turn = start_turn(session, prompt("second"), RecordingAsker(), Events().append)
    await until(lambda: bool(texts))

    snapshot = await session.snapshot()
    shown = [e for e in snapshot.events() if isinstance(e, AgentText | TurnStarted)]
    said = "".join(f"[{e.parts[0].text}]" if isinstance(e, TurnStarted) else e.text for e in shown)
    assert said == "[first]earlier answer[second]" + "".join(texts)
    stored = await runtime.store.messages(session.id)
    assert not any("partial" in m.text for m in stored)  # only the log has it yet
    later: list[Logged] = []
    session.follow(later.append, after=snapshot.cursor)
    await session.stop_turn(DEADLINE_S)
    assert turn.result() == "cancelled"
    assert isinstance(later[-1].event, TurnEnded) and not any(
        isinstance(e.event, TurnStarted) for e in later
    )


async def test_a_reopened_session_replays_its_transcript_then_its_new_events(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    runtime = make_runtime([{"text": "stored answer"}, {"text": "new answer"}])
    session = await runtime.new_session(tmp_path)
    await run_turn(session, prompt("old"), RecordingAsker(), Events().append)
    runtime.release(session.id)
    again = await runtime.open_session(session.id)
    assert again is not session and (await again.snapshot()).logged == []
    await run_turn(again, prompt("new"), RecordingAsker(), Events().append)
    snapshot = await again.snapshot()
    assert [type(e).__name__ for e in snapshot.history] == ["TurnStarted", "AgentText"]
    assert kinds(snapshot.logged)[0] == "TurnStarted"
    assert snapshot.logged[0].seq == 1 and snapshot.cursor == snapshot.logged[-1].cursor


async def test_cursors_from_another_log_or_beyond_it_expire(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    runtime = make_runtime()
    one, two = await runtime.new_session(tmp_path), await runtime.new_session(tmp_path)
    await run_turn(one, prompt("a"), RecordingAsker(), Events().append)
    head = (await one.snapshot()).cursor
    epoch, _, seq = head.partition(".")
    for bad in ((await two.snapshot()).cursor, f"{epoch}.{int(seq) + 1}", "nonsense", f"{epoch}.x"):
        with pytest.raises(CursorExpired):
            one.follow(lambda e: None, after=bad)
    got: list[Logged] = []
    one.follow(got.append, after=head)
    assert got == []  # at the head: nothing missed


async def test_old_turns_leave_a_full_log_but_the_snapshot_still_has_them_from_the_transcript(
    make_runtime: MakeRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(event_log, "MAX_EVENTS", 8)
    runtime = make_runtime([{"text": f"answer {n}"} for n in range(4)])
    session = await runtime.new_session(tmp_path)
    start = (await session.snapshot()).cursor
    early: list[Logged] = []
    session.follow(early.append)
    for n in range(4):
        await run_turn(session, prompt(f"q{n}"), RecordingAsker(), Events().append)
    with pytest.raises(CursorExpired):
        session.follow(lambda e: None, after=start)  # its turns left the log
    snapshot = await session.snapshot()
    assert len(snapshot.logged) <= 8 and isinstance(snapshot.logged[0].event, TurnStarted)
    prompts = [e.parts[0].text for e in snapshot.events() if isinstance(e, TurnStarted)]
    answers = [e.text for e in snapshot.events() if isinstance(e, AgentText)]
    assert prompts == ["q0", "q1", "q2", "q3"]
    assert "".join(answers) == "answer 0answer 1answer 2answer 3"
    # A follower that kept up lost nothing, trimming or not.
    assert [e.seq for e in early] == list(range(1, len(early) + 1))
    titles = [e for e in early if isinstance(e.event, TitleChanged)]
    assert len(titles) == 1


async def test_a_turn_streaming_more_than_the_log_holds_joins_its_older_text(
    make_runtime: MakeRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long answer a word an event: the log stays bounded while the turn runs, its
    snapshot still says every word in order, and only a cursor into the joined part
    expires."""
    monkeypatch.setattr(event_log, "MAX_EVENTS", 20)
    words = [f"w{n} " for n in range(300)]
    gate = tmp_path / "gate"
    runtime = make_runtime([{"text": "".join(words), "pauseFor": str(gate)}])
    session = await runtime.new_session(tmp_path)
    early: list[Logged] = []
    session.follow(early.append)
    running = start_turn(session, prompt("talk"), RecordingAsker(), Events().append)
    await until(lambda: any(isinstance(e.event, AgentText) for e in early))
    first_word = next(e for e in early if isinstance(e.event, AgentText)).cursor
    gate.touch()
    sizes: list[int] = []
    session.follow(lambda e: sizes.append(len(session.log.logged)))
    await running
    # At most the limit, plus one joined event for each half of it the turn streamed.
    assert max(sizes) <= 20 + len(words) // 10 < len(words)
    snapshot = await session.snapshot()
    said = "".join(e.text for e in snapshot.events() if isinstance(e, AgentText))
    assert said == "".join(words)
    with pytest.raises(CursorExpired):  # it points into text since joined
        session.follow(lambda e: None, after=first_word)
    late: list[Logged] = []
    session.follow(late.append, after=snapshot.logged[-3].cursor)  # after the joined part
    assert [e.seq for e in late] == [e.seq for e in snapshot.logged[-2:]]
    # A follower that kept up got every word as its own event.
    assert "".join(e.event.text for e in early if isinstance(e.event, AgentText)) == said
    assert [e.seq for e in early] == list(range(1, len(early) + 1))


async def test_a_session_let_go_keeps_each_turns_text_as_one_event(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    """Once nothing follows it, a session waiting to leave memory keeps each ended turn's
    text as one event (a word an event held a UI's worth of objects per word): the
    snapshot says the same, a cursor at an event the log still holds resumes exactly, and
    only one inside joined text expires."""
    runtime = make_runtime(
        [{"text": "one two three four"}, {"text": "five six seven"}, {"text": "eight nine"}]
    )
    session = await runtime.new_session(tmp_path)
    seen: list[Logged] = []
    stop = session.follow(seen.append)
    for said in ("a", "b"):
        await run_turn(session, prompt(said), RecordingAsker(), Events().append)
    stop()  # the UI left after the second turn ...
    await run_turn(session, prompt("c"), RecordingAsker(), Events().append)  # ... a third ran
    before = (await session.snapshot()).events()

    runtime.let_go(session.id)

    assert runs_joined((await session.snapshot()).events()) == runs_joined(before)
    texts = [e.event.text for e in session.log.logged if isinstance(e.event, AgentText)]
    assert texts == ["one two three four", "five six seven", "eight nine"]
    after_second = seen[-1]  # the TurnEnded of the second turn: still held
    back: list[Logged] = []
    session.follow(back.append, after=after_second.cursor)
    assert "".join(e.event.text for e in back if isinstance(e.event, AgentText)) == "eight nine"
    mid_word = next(e for e in seen if isinstance(e.event, AgentText)).cursor
    with pytest.raises(CursorExpired):  # inside the first turn's joined text
        session.follow(lambda e: None, after=mid_word)


async def test_a_session_followed_or_in_a_turn_is_not_joined_when_let_go(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    runtime = make_runtime(
        [{"text": "one two three"}, {"text": "four five six", "pauseFor": str(gate)}]
    )
    session = await runtime.new_session(tmp_path)

    def words() -> int:
        return sum(isinstance(e.event, AgentText) for e in session.log.logged)

    await run_turn(session, prompt("a"), RecordingAsker(), Events().append)
    stop = session.follow(lambda e: None)
    runtime.let_go(session.id)  # a turn ended, but a UI still follows
    assert words() == 3
    stop()
    running = start_turn(session, prompt("b"), RecordingAsker(), Events().append)
    await until(lambda: words() == 4)  # the second turn said its first word, then waits
    runtime.let_go(session.id)
    assert words() == 4
    gate.touch()
    await running
    runtime.let_go(session.id)  # over and unfollowed: each turn's text is one event
    assert words() == 2


def test_a_long_answers_joined_text_is_held_in_less_memory_than_it_says() -> None:
    """Streamed a word an event, a long answer's older text is kept compressed: it reads
    back word for word, in less memory than the text itself (so a long answer is not
    held twice while it streams)."""
    import random
    import tracemalloc

    vocabulary = [f"{random.Random(n).getrandbits(40):x}" for n in range(3000)]
    pick = random.Random(7)
    events = [AgentText(" ".join(pick.choices(vocabulary, k=20)) + " ") for _ in range(40_000)]
    said = "".join(e.text for e in events)
    log = event_log.EventLog("ses_long", base=0)
    tracemalloc.start()
    try:
        for event in events:
            log.append(event, version=0)
        held, _ = tracemalloc.get_traced_memory()  # the events themselves were made before
    finally:
        tracemalloc.stop()
    assert held < 0.6 * len(said)
    replayed = log.snapshot([]).events()
    assert "".join(e.text for e in replayed if isinstance(e, AgentText)) == said
    late: list[Logged] = []
    log.follow(late.append, after=log.logged[-3].cursor)
    assert [e.event for e in late] == events[-2:]


async def test_what_another_process_wrote_expires_the_cursors_and_shows_in_the_snapshot(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    here = make_runtime([{"text": "from here"}])
    session = await here.new_session(tmp_path)
    await run_turn(session, prompt("one"), RecordingAsker(), Events().append)
    cursor = (await session.snapshot()).cursor
    elsewhere = Runtime(here.config, here.paths, face="other")  # the same store, as another
    try:  # Raven process would open it
        other = await elsewhere.open_session(session.id)
        await run_turn(other, prompt("two"), RecordingAsker(), Events().append)
    finally:
        await elsewhere.aclose()

    await session.catch_up()
    with pytest.raises(CursorExpired):
        session.follow(lambda e: None, after=cursor)
    prompts = [
        e.parts[0].text for e in (await session.snapshot()).events() if isinstance(e, TurnStarted)
    ]
    assert prompts == ["one", "two"]
