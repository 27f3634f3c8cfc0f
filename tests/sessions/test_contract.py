"""What every session store does, the same on SQLite and on PostgreSQL."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from raven.config import Paths, SessionsConfig
from raven.messages import (
    AssistantMessage,
    CompactionMessage,
    ToolCall,
    ToolResultMessage,
    user_text,
)
from raven.sessions import (
    AmbiguousSession,
    BadCursor,
    SessionNotFound,
    Sessions,
    TurnElsewhere,
    new_record,
    open_sessions,
)
from tests.sessions.elsewhere import another_process

KINDS = ["sqlite", "postgresql"]


@pytest.fixture(params=KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Sessions]:
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    paths = Paths(config_file=tmp_path / "config.json", data_dir=tmp_path / "data")
    opened = open_sessions(SessionsConfig(url=url), paths)
    yield opened
    await opened.aclose()


async def test_messages_round_trip_in_order(store: Sessions) -> None:
    rec = await store.create("/work", face="cli", model="echo")
    msgs = [
        user_text("hi"),
        AssistantMessage(
            text="calling", tool_calls=[ToolCall(id="c", name="t", arguments={"a": 1})]
        ),
        ToolResultMessage(call_id="c", name="t", content="out", is_error=True),
    ]
    for m in msgs:
        await store.append(rec.id, m)
    assert await store.messages(rec.id) == msgs
    assert await store.messages(rec.id, last=2) == msgs[1:]
    assert await store.version(rec.id) == 3


async def test_the_window_starts_at_the_newest_compactions_kept_part(store: Sessions) -> None:
    rec = await store.create("/work", face="cli", model="echo")
    assert (await store.window(rec.id)).start == 0
    said = [user_text(f"turn {n}") for n in range(6)]
    for message in said[:4]:
        await store.append(rec.id, message)
    first = CompactionMessage(id="cmp_1", summary="turns 0 and 1", kept_from=2)
    await store.append(rec.id, first)
    await store.append(rec.id, said[4])
    window = await store.window(rec.id)
    assert (window.start, window.messages) == (2, [*said[2:4], first, said[4]])
    second = CompactionMessage(id="cmp_2", summary="turns 0 to 3", kept_from=5)
    await store.append(rec.id, second)
    await store.append(rec.id, said[5])
    window = await store.window(rec.id)
    assert (window.start, window.messages) == (5, [said[4], second, said[5]])
    # The whole transcript stays; a bounded read takes only what it asks for.
    assert len(await store.messages(rec.id)) == 8
    assert await store.messages(rec.id, last=2, upto=4) == said[2:4]
    # A fork keeps a compaction it holds, and none it does not.
    early = await store.fork(rec.id, "/work", face="cli", upto=4)
    assert (await store.window(early.id)).start == 0
    late = await store.fork(rec.id, "/work", face="cli", upto=6)
    assert (await store.window(late.id)).messages == [*said[2:4], first, said[4]]


async def test_a_fork_holds_the_transcript_up_to_where_it_was_asked_and_names_its_parent(
    store: Sessions,
) -> None:
    rec = await store.create("/work", face="acp", mode="plan", model="echo")
    said = [user_text("one"), AssistantMessage(text="two"), user_text("three")]
    for message in said:
        await store.append(rec.id, message, title="Counting" if message is said[0] else None)
    whole = await store.fork(rec.id, "/elsewhere", face="acp")
    assert (whole.parent, whole.cwd, whole.title) == (rec.id, "/elsewhere", "Counting")
    assert (whole.mode, whole.model) == ("plan", "echo")
    assert await store.messages(whole.id) == said and await store.version(whole.id) == 3
    early = await store.fork(rec.id, "/work", face="cli", upto=1)
    assert await store.messages(early.id) == said[:1] and await store.version(early.id) == 1
    # The fork goes on alone: its parent is unchanged, and the fork is listed naming it.
    await store.append(whole.id, AssistantMessage(text="four"))
    assert await store.messages(rec.id) == said
    listed = {r.id: r.parent for r in (await store.page()).sessions}
    assert listed == {rec.id: None, whole.id: rec.id, early.id: rec.id}
    found = {h.record.id for h in await store.search("three")}  # copied words are found too
    assert found == {rec.id, whole.id}
    with pytest.raises(SessionNotFound):
        await store.fork("ses_missing", "/work", face="cli")


async def test_pages_newest_first_with_a_directory_filter(store: Sessions) -> None:
    ids = [(await store.create("/a" if i % 2 else "/b", face="cli")).id for i in range(7)]
    seen, cursor = [], None
    while True:
        page = await store.page(cursor=cursor, limit=3)
        seen += [r.id for r in page.sessions]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == list(reversed(ids))
    assert [r.cwd for r in (await store.page(cwd="/a")).sessions] == ["/a"] * 3
    assert (await store.page(cwd="/nowhere")).sessions == []
    with pytest.raises(BadCursor):
        await store.page(cursor="not-a-cursor")


async def test_pages_leave_out_a_face_when_asked(store: Sessions) -> None:
    mine = await store.create("/work", face="cli")
    theirs = await store.create("/work", face="subagent")
    assert {r.id for r in (await store.page("/work")).sessions} == {mine.id, theirs.id}
    kept = await store.page("/work", limit=1, not_face="subagent")
    assert [r.id for r in kept.sessions] == [mine.id] and kept.next_cursor is None


async def test_pages_filter_by_a_piece_of_the_title_or_directory(store: Sessions) -> None:
    lemon = (await store.create("/home/me/Lemons", face="cli")).id
    await store.update((await store.create("/srv", face="cli")).id, title="Fix 100% of the_bugs")
    await store.create("/srv/other", face="cli")
    assert [r.id for r in (await store.page(query="lemon")).sessions] == [lemon]  # any case
    titles = [r.title for r in (await store.page(query="100%")).sessions]
    assert titles == ["Fix 100% of the_bugs"]
    assert [r.title for r in (await store.page(query="e_b")).sessions] == titles
    assert (await store.page(query="0%o")).sessions == []  # % and _ are literal
    assert (await store.page(query="x_y")).sessions == []


async def test_update_delete_and_not_found(store: Sessions) -> None:
    rec = await store.create("/w", face="acp")
    assert (await store.update(rec.id, title="Fix the bug", closed=True)).title == "Fix the bug"
    assert (await store.get(rec.id)).closed
    assert await store.delete(rec.id) is True
    assert await store.delete(rec.id) is False
    for missing in (
        store.get(rec.id),
        store.append(rec.id, user_text("x")),
        store.messages(rec.id),
        store.update(rec.id, title="x"),
        store.claim_turn(rec.id),
    ):
        with pytest.raises(SessionNotFound):
            await missing


async def test_ids_resolve_from_unique_prefixes(store: Sessions) -> None:
    first = await store.create("/w", face="cli", session_id="ses_abc1")
    await store.create("/w", face="cli", session_id="ses_abc2")
    assert await store.resolve("ses_abc1") == first.id
    assert await store.resolve("abc1") == first.id  # ses_ may be left off
    with pytest.raises(AmbiguousSession, match=r"ses_abc1, ses_abc2|ses_abc2, ses_abc1"):
        await store.resolve("abc")
    with pytest.raises(SessionNotFound):
        await store.resolve("zzz")
    with pytest.raises(SessionNotFound):
        await store.resolve("%")  # not a wildcard


async def test_a_deferred_session_is_stored_with_its_first_message(store: Sessions) -> None:
    record = new_record("/w", "a2a", None, "echo", "a2a_fixed")
    with pytest.raises(SessionNotFound):
        await store.get("a2a_fixed")
    await store.append(record.id, user_text("first"), "First", record)
    assert (await store.get("a2a_fixed")).title == "First"
    assert [m.text for m in await store.messages("a2a_fixed")] == ["first"]  # type: ignore[union-attr]


async def test_get_or_create_makes_a_session_once(store: Sessions) -> None:
    made, window = await store.get_or_create("a2a_x", "/w", "a2a", None, "echo")
    assert window.messages == [] and made.id == "a2a_x"
    await store.append("a2a_x", user_text("kept"))
    again, window = await store.get_or_create("a2a_x", "/elsewhere", "a2a", None, "echo")
    assert again.cwd == "/w" and [m.text for m in window.messages] == ["kept"]  # type: ignore[union-attr]


async def test_search_finds_every_word_with_a_marked_snippet(store: Sessions) -> None:
    old = await store.create("/w", face="test", model="m")
    await store.append(old.id, user_text("remember the marigolds"))
    new = await store.create("/w", face="test", model="m")
    await store.append(new.id, user_text("read the log"))
    result = ToolResultMessage(call_id="c", name="read_file", content="ERROR the disk of petunias")
    await store.append(new.id, result)
    call = ToolCall(id="k", name="write_file", arguments={"path": "zinnias.txt"})
    await store.append(new.id, AssistantMessage(text="", tool_calls=[call]))
    assert [h.record.id for h in await store.search("marigolds")] == [old.id]
    (hit,) = await store.search("petunias disk")
    assert hit.record.id == new.id and "\x02petunias\x03" in hit.snippet
    assert [h.record.id for h in await store.search("zinnias")] == [new.id]  # tool arguments
    assert await store.search("petunias marigolds") == []  # every word, in one message
    assert await store.search("petunias", cwd="/elsewhere") == []
    assert await store.search('"); DROP TABLE x; --') == []
    await store.delete(new.id)
    assert await store.search("petunias") == []


async def test_a_huge_answer_is_kept_whole_and_found_by_its_first_words(store: Sessions) -> None:
    """The word index takes the first INDEXED_CHARS of each part of a message: what a
    search finds, at a memory cost that does not grow with the answer (PostgreSQL would
    refuse a message whose words pass its 1 MB limit)."""
    record = await store.create("/w", face="test", model="m")
    words = " ".join(f"w{n}" for n in range(400_000))  # 3 MB, every word different
    answer = f"asters {words} begonias"
    await store.append(record.id, AssistantMessage(text=answer))
    (kept,) = await store.messages(record.id)
    assert kept.text == answer  # type: ignore[union-attr]
    assert [h.record.id for h in await store.search("asters")] == [record.id]
    assert await store.search("begonias") == []  # past what the index takes


async def test_a_turns_failure_is_kept_until_a_turn_ends_well(store: Sessions) -> None:
    record = await store.create("/w", "test")
    assert await store.claim_turn(record.id) == 0
    await store.release_turn(record.id, "the model server is down")
    assert (await store.get(record.id)).failure == "the model server is down"
    assert (await store.page()).sessions[0].failure == "the model server is down"
    await store.claim_turn(record.id)
    await store.release_turn(record.id, None)
    assert (await store.get(record.id)).failure is None


async def test_another_live_process_holding_the_claim_is_refused(
    store: Sessions, tmp_path: Path
) -> None:
    """Claimed by a `raven` process of its own, a session refuses this one's turn and
    guarded changes; once that process is gone, its claim is taken over at once."""
    record = await store.create("/w", "test")
    other = claim_from_another_process(store, tmp_path, record.id)
    try:
        for refused in (
            store.claim_turn(record.id),
            store.update(record.id, closed=True, guarded=True),
            store.delete(record.id, guarded=True),
        ):
            with pytest.raises(TurnElsewhere) as caught:
                await refused
            assert caught.value.pid == other.pid and not caught.value.remote
        assert (await store.update(record.id, title="unguarded")).title == "unguarded"
    finally:
        other.stdin.close()  # type: ignore[union-attr]
        other.wait(30)
        other.stdout.close()  # type: ignore[union-attr]
    assert await store.claim_turn(record.id) == 0  # the holder is gone: taken over
    await store.release_turn(record.id)


def claim_from_another_process(
    store: Sessions, tmp_path: Path, session_id: str
) -> subprocess.Popen[str]:
    """A process that claims the session through a store like `store` and holds the
    claim until its stdin closes (then exits without releasing it)."""
    return another_process(store, tmp_path, session_id, "    await store.claim_turn(key)")
