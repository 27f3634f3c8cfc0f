"""What only the PostgreSQL store does: a session's shared log, its claims as leases."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from raven.config import Paths, SessionsConfig
from raven.messages import AssistantMessage, TextPart, ToolResultMessage, UserMessage
from raven.sessions import NewEvent, Sessions, SharedSessions, TurnLost, open_sessions, postgres


@pytest.fixture
async def store(pg_url: str, tmp_path: Path) -> AsyncIterator[SharedSessions]:
    paths = Paths(config_file=tmp_path / "config.json", data_dir=tmp_path / "data")
    opened = open_sessions(SessionsConfig(url=pg_url), paths)
    assert isinstance(opened, postgres.PostgresSessions)
    yield opened
    await opened.aclose()


def turn(n: int, events: int) -> list[NewEvent]:
    """A turn's events as a face would log them: its start, `events` more, its end."""
    started = NewEvent(n, "TurnStarted", json.dumps({"type": "TurnStarted", "n": n}))
    said = [NewEvent(n, "AgentText", json.dumps({"type": "AgentText"})) for _ in range(events)]
    return [started, *said, NewEvent(n, "TurnEnded", json.dumps({"type": "TurnEnded"}))]


async def test_the_log_numbers_events_in_order_and_lets_its_oldest_whole_turns_go(
    store: SharedSessions, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres, "MAX_LOGGED_EVENTS", 8)
    monkeypatch.setattr(postgres, "TRIM_EVERY", 1)
    record = await store.create("/w", "test")
    for n in range(4):  # five events a turn: the log keeps the newest turns within eight
        await store.claim_turn(record.id)
        rows = turn(n, 3)
        assert await store.log_append(record.id, rows[:2], fenced=True) == n * 5 + 1
        assert await store.end_turn(record.id, None, rows[2:]) == n * 5 + 3
    epoch, head, kept = await store.log_open(record.id)
    assert head == 20 and epoch
    assert [row.seq for row in kept] == list(range(16, 21))  # the newest turn, whole
    assert json.loads(kept[0].body)["n"] == 3


async def test_a_turns_events_need_its_claim(store: SharedSessions) -> None:
    record = await store.create("/w", "test")
    with pytest.raises(TurnLost):
        await store.log_append(record.id, turn(0, 1), fenced=True)
    assert await store.log_append(record.id, turn(0, 1), fenced=False) == 1  # a session event
    assert await store.send(record.id, "cancel") is False  # no turn runs to take it
    await store.claim_turn(record.id)
    assert await store.send(record.id, "steer", "the tests too")
    (item,) = await store.take_inbox([record.id])
    assert (item.kind, item.text) == ("steer", "the tests too")
    assert await store.take_inbox([record.id]) == []
    assert await store.renew_claims([record.id, "ses_other"]) == [record.id]


async def test_a_turn_that_lost_its_claim_stores_nothing_more(store: SharedSessions) -> None:
    record = await store.create("/w", "test")
    await store.claim_turn(record.id)
    postgres_store = store
    assert isinstance(postgres_store, postgres.PostgresSessions)
    # Another replica took the claim over (this one's lease lapsed while it was cut off).
    async with postgres_store._conn() as conn:
        await conn.execute(
            "UPDATE raven_sessions SET turn_holder = 'another' WHERE id = $1", record.id
        )
    assert await store.end_turn(record.id, "late", turn(0, 1)) is None
    _, head, kept = await store.log_open(record.id)
    assert head == 0 and kept == []
    assert (await store.get(record.id)).failure is None  # the other holder's to say


def said(text: str) -> UserMessage:
    return UserMessage(parts=[TextPart(text=text)])


async def texts(store: Sessions, session_id: str) -> list[str]:
    messages = await store.messages(session_id)
    return [m.text for m in messages if not isinstance(m, ToolResultMessage)]


async def test_a_message_appended_soon_goes_with_the_next_append_or_at_the_steps_end(
    store: SharedSessions, pg_url: str, tmp_path: Path
) -> None:
    record = await store.create("/w", "test")
    await store.append(record.id, said("what failed?"), "what failed?", soon=True)
    await store.append(record.id, AssistantMessage(text="The build."))  # one statement, both
    assert await texts(store, record.id) == ["what failed?", "The build."]
    assert (await store.get(record.id)).title == "what failed?"
    assert await store.version(record.id) == 2

    await store.append(record.id, said("and now?"), soon=True)  # nothing follows it
    async with asyncio.timeout(10):  # stored once this step is over, unasked
        while await texts(store, record.id) != ["what failed?", "The build.", "and now?"]:
            await asyncio.sleep(0.01)

    await store.claim_turn(record.id)
    await store.append(record.id, said("one more"), soon=True)
    await store.end_turn(record.id, None, [])  # the turn's end comes after its messages
    assert (await texts(store, record.id))[-1] == "one more"

    await store.claim_turn(record.id)
    await store.append(record.id, said("under way"), soon=True)
    async with asyncio.timeout(10):  # the step ended: its write is under way
        while record.id in store._staged:  # type: ignore[attr-defined]
            await asyncio.sleep(0)
    await store.end_turn(record.id, None, [])  # ...and the turn's end waits for it
    assert (await texts(store, record.id))[-1] == "under way"

    await store.append(record.id, said("last words"), soon=True)
    await store.aclose()  # closing stores what is staged
    paths = Paths(config_file=tmp_path / "config.json", data_dir=tmp_path / "data")
    again = open_sessions(SessionsConfig(url=pg_url), paths)
    try:
        assert (await texts(again, record.id))[-1] == "last words"
        assert await again.version(record.id) == 6
    finally:
        await again.aclose()
