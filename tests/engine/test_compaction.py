"""Compaction: a long session stays inside its model's window against a server that
refuses what passes it, the model still sees what the summary carries, the whole
transcript stays stored, and a compaction that fails changes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raven.engine import (
    CompactionText,
    CompactionUpdated,
    Notice,
    Runtime,
    ToolCallUpdated,
    TurnEnded,
    run_turn,
)
from raven.engine.compaction import NothingToCompact, conversation, message_chars, split
from raven.messages import (
    AssistantMessage,
    CompactionMessage,
    TextPart,
    ToolCall,
    ToolResultMessage,
    user_text,
)
from tests.engine.conftest import Events, MakeRuntime, RecordingAsker
from tests.fakes.compacting import SECRET, WINDOW, compacting_model, summarising
from tests.fakes.model_server import FakeModelServer, Reply, openai_stream, request_tokens


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    server = FakeModelServer().start()
    server.context_tokens = WINDOW
    try:
        yield server
    finally:
        server.stop()


model = compacting_model


def local(server: FakeModelServer, **compaction: Any) -> dict[str, Any]:
    spec = {"id": "local", "provider": "openai", "baseUrl": server.url + "/v1"}
    return {
        "models": [{**spec, "contextWindow": WINDOW}],
        "defaultModel": "local",
        "compaction": compaction,
    }


async def test_a_200_turn_session_never_passes_the_window_and_keeps_what_the_summary_says(
    make_runtime: MakeRuntime, tmp_path: Path, server: FakeModelServer
) -> None:
    runtime = make_runtime(**local(server))
    session = await runtime.new_session(tmp_path)
    events = Events()
    turns = 200
    for n in range(turns):
        server.queue(model, model)  # a turn's answer, and a summary if it compacts
        said = SECRET if n == 0 else f"step {n}: " + "go on " * 40
        stop = await run_turn(session, [TextPart(text=said)], RecordingAsker(), events.append)
        assert stop == "end_turn" and not events.of(Notice), events.of(Notice)
        server.replies.clear()
    answering = [r.body for r in server.requests if not summarising(r.body)]
    assert len(answering) == turns
    assert max(request_tokens(b) for b in answering) <= WINDOW
    summaries = [r.body for r in server.requests if summarising(r.body)]
    assert summaries and all(b["max_tokens"] == WINDOW * 15 // 100 for b in summaries)
    done = [e for e in events.of(CompactionUpdated) if e.status == "completed"]
    assert len(done) >= 5
    assert all(e.tokens_after < e.tokens_before for e in done)
    # The model still knows the first turn, hundreds of messages later, through the summary.
    assert SECRET in answering[-1]["messages"][0]["content"]
    # The whole transcript stays in the store; the live session holds only its window.
    stored = await runtime.transcript(session.id)
    assert sum(1 for m in stored if m.role == "user") == turns
    assert sum(1 for m in stored if isinstance(m, CompactionMessage)) == len(done)
    assert len(session.window) < 40 and session.version == len(stored)
    # Opened by another runtime on the same store, the session reads only its window.
    again = Runtime(runtime.config, runtime.paths, face="test")
    try:
        reopened = await again.open_session(session.id)
    finally:
        await again.aclose()
    assert reopened.window_start == session.window_start
    assert [m.model_dump() for m in reopened.window] == [m.model_dump() for m in session.window]


async def test_the_summary_streams_and_the_compaction_is_told_in_order(
    make_runtime: MakeRuntime, tmp_path: Path, server: FakeModelServer
) -> None:
    runtime = make_runtime(**local(server, threshold=0.3))
    session = await runtime.new_session(tmp_path)
    events = Events()
    for word in ("alpha", "beta", "gamma", "delta"):
        server.queue(model, model)
        await run_turn(session, [TextPart(text=word * 150)], RecordingAsker(), events.append)
        server.replies.clear()
    told = [e for e in events if isinstance(e, CompactionUpdated | CompactionText)]
    first = told[0]
    assert isinstance(first, CompactionUpdated) and first.status == "in_progress"
    end = next(e for e in told if isinstance(e, CompactionUpdated) and e.status != "in_progress")
    text = "".join(e.text for e in told[: told.index(end)] if isinstance(e, CompactionText))
    assert end.status == "completed" and end.summary == text.strip()
    # The replay of the stored session shows the compaction where it happened.
    replayed = await runtime.history(session.id)
    (shown,) = [e for e in replayed if isinstance(e, CompactionUpdated)][:1]
    assert shown.compaction_id == end.compaction_id and shown.summary == end.summary


async def test_a_compaction_that_fails_leaves_the_session_as_it_was_and_says_why(
    make_runtime: MakeRuntime, tmp_path: Path, server: FakeModelServer
) -> None:
    runtime = make_runtime(**local(server, threshold=0.65))
    session = await runtime.new_session(tmp_path)
    events = Events()
    server.queue(model)
    await run_turn(session, [TextPart(text="alpha" * 150)], RecordingAsker(), events.append)
    assert not events.of(CompactionUpdated)
    before = [m.model_dump() for m in session.window]
    failing = Reply(status=400, body=json.dumps({"error": {"message": "summaries are off"}}))
    server.queue(failing, model)
    await run_turn(session, [TextPart(text="beta" * 150)], RecordingAsker(), events.append)
    started, failed = events.of(CompactionUpdated)
    assert (started.status, failed.status) == ("in_progress", "failed")
    assert "summaries are off" in (failed.error or "")
    assert [m.model_dump() for m in session.window][: len(before)] == before
    assert session.window_start == 0 and session.summary is None
    stored = await runtime.transcript(session.id)
    assert not any(isinstance(m, CompactionMessage) for m in stored)
    assert len(stored) == 4 and events.of(TurnEnded)[-1].error is None  # the turn went on


async def test_a_compaction_in_the_middle_of_a_tool_loop_keeps_the_running_turn_whole(
    make_runtime: MakeRuntime, tmp_path: Path, server: FakeModelServer
) -> None:
    """The window fills during a turn's tool calls: the turns before it are summarised,
    and every call of the running turn stays with its result (the server refuses a
    result whose call it was not sent)."""
    (tmp_path / "notes.txt").write_text("a line of notes to read\n" * 20)
    read = json.dumps({"path": "notes.txt"})

    def reading(body: dict[str, Any]) -> Reply:
        if summarising(body):
            return compacting_model(body)
        results = sum(1 for m in body["messages"] if m["role"] == "tool")
        if results < 3:
            return Reply(events=openai_stream(tool_calls=[(f"r{results}", "read_file", read)]))
        return Reply(events=openai_stream(text="Read it three times.", usage=None))

    runtime = make_runtime(**local(server, threshold=0.7))
    session = await runtime.new_session(tmp_path)
    events = Events()
    server.queue(compacting_model)
    await run_turn(session, [TextPart(text="alpha" * 150)], RecordingAsker(), events.append)
    server.queue(*[reading] * 6)
    stop = await run_turn(session, [TextPart(text="read it")], RecordingAsker(), events.append)
    assert stop == "end_turn" and not events.of(Notice), events.of(Notice)
    assert [e.status for e in events.of(CompactionUpdated)] == ["in_progress", "completed"]
    began = events.index(events.of(CompactionUpdated)[0])
    done = [i for i, e in enumerate(events) if isinstance(e, ToolCallUpdated)]
    assert done[0] < began < done[-1]  # between the turn's tool calls
    last = server.requests[-1].body["messages"]
    assert [m["role"] for m in last[1:]] == ["user", *["assistant", "tool"] * 3]
    assert "alpha" not in json.dumps(last[1:])  # the first turn is in the summary only


async def test_a_window_nobody_configured_is_learned_from_the_servers_refusal(
    make_runtime: MakeRuntime, tmp_path: Path, server: FakeModelServer
) -> None:
    """No `contextWindow` in the config: the first request that passes llama.cpp's context
    is refused with its size (`n_ctx`), the session compacts to it and asks again, and
    no later request passes it."""
    spec = {"id": "local", "provider": "openai", "baseUrl": server.url + "/v1"}
    runtime = make_runtime(models=[spec], defaultModel="local")
    session = await runtime.new_session(tmp_path)
    events = Events()
    for n in range(40):
        server.queue(compacting_model, compacting_model, compacting_model)
        said = SECRET if n == 0 else f"step {n}: " + "go on " * 40
        stop = await run_turn(session, [TextPart(text=said)], RecordingAsker(), events.append)
        assert stop == "end_turn" and not events.of(Notice), events.of(Notice)
        server.replies.clear()
    assert session.learned_window == WINDOW
    refused = [r for r in server.requests if request_tokens(r.body) > WINDOW]
    assert len(refused) == 1  # once learned, the session compacts before it passes it
    assert [e.status for e in events.of(CompactionUpdated)][:2] == ["in_progress", "completed"]
    answering = [r.body for r in server.requests if not summarising(r.body)]
    assert SECRET in answering[-1]["messages"][0]["content"]


async def test_a_cheaper_model_configured_for_summaries_writes_them(
    make_runtime: MakeRuntime, tmp_path: Path, server: FakeModelServer
) -> None:
    config = local(server, threshold=0.65, model="cheap")
    cheap = {"id": "cheap", "provider": "openai", "baseUrl": server.url + "/v1"}
    config["models"].append(cheap)
    runtime = make_runtime(**config)
    session = await runtime.new_session(tmp_path)
    for word in ("alpha", "beta"):
        server.queue(model, model)
        await run_turn(session, [TextPart(text=word * 150)], RecordingAsker(), Events().append)
        server.replies.clear()
    asked = {r.body["model"]: summarising(r.body) for r in server.requests}
    assert asked == {"local": False, "cheap": True}


async def test_compaction_waits_for_a_window_it_knows(
    make_runtime: MakeRuntime, tmp_path: Path, server: FakeModelServer
) -> None:
    """Off, or with no window known, nothing is summarised: the request goes as it is."""
    config = local(server, auto=False, threshold=0.1)
    runtime = make_runtime(**config)
    session = await runtime.new_session(tmp_path)
    events = Events()
    for word in ("alpha", "beta"):
        server.queue(model)
        await run_turn(session, [TextPart(text=word * 150)], RecordingAsker(), events.append)
    assert not events.of(CompactionUpdated)
    assert not any(summarising(r.body) for r in server.requests)


def test_the_kept_part_starts_at_a_persons_message_and_never_after_the_running_turn() -> None:
    call = ToolCall(id="c1", name="read_file", arguments={"path": "a"})
    messages = [
        user_text("one"),
        AssistantMessage(tool_calls=[call]),
        ToolResultMessage(call_id="c1", name="read_file", content="x" * 400),
        AssistantMessage(text="done"),
        user_text("two"),
        AssistantMessage(text="ok"),
        user_text("three"),
    ]
    sizes = [message_chars(m) for m in messages]
    tail = sum(sizes[4:])
    assert split(messages, 10, sizes, tail, latest=16) == 14  # "two" and after fit
    assert split(messages, 10, sizes, 0, latest=16) == 16  # only the running turn
    assert split(messages, 10, sizes, 0, latest=14) == 14  # never past the running turn
    with pytest.raises(NothingToCompact):
        split(messages[:4], 10, sizes[:4], 0, latest=10)  # a tool loop: no person between


def test_the_summariser_reads_the_newest_messages_and_the_previous_summary() -> None:
    messages = [user_text(f"message {n} " + "x" * 100) for n in range(50)]
    read = conversation("earlier: plum", messages, 2_000)
    assert read.startswith("[Summary of what came before]\nearlier: plum")
    assert "message 49" in read and "message 0 " not in read and "left out" in read
    assert len(read) <= 2_000
