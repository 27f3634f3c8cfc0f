from __future__ import annotations

import asyncio
import dataclasses
import os
from pathlib import Path

import pytest

from raven.engine import (
    CANCELLED_RESULT,
    AgentText,
    AgentThought,
    ApprovalRequest,
    Decision,
    FileDiff,
    LiveSession,
    Notice,
    SessionBusy,
    TitleChanged,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEnded,
    TurnStarted,
    UsageUpdated,
    preview_lines,
    run_turn,
    start_turn,
)
from raven.messages import AssistantMessage, TextPart, ToolResultMessage, UserMessage
from tests.engine.conftest import Events, MakeRuntime, RecordingAsker
from tests.processes import ended, pid_from


def prompt(text: str) -> list[TextPart]:
    return [TextPart(text=text)]


def turn_started(session: LiveSession) -> asyncio.Event:
    """Set once a turn has started in `session` (its log has `TurnStarted`)."""
    started = asyncio.Event()
    session.follow(lambda e: started.set() if isinstance(e.event, TurnStarted) else None)
    return started


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


async def test_echo_turn_streams_text_and_stores_the_transcript(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    runtime = make_runtime()
    session = await runtime.new_session(tmp_path)
    events = Events()
    stop = await run_turn(session, prompt("hello world"), RecordingAsker(), events.append)
    assert stop == "end_turn"
    assert "".join(e.text for e in events.of(AgentText)) == "hello world"
    assert events.of(TitleChanged) == [TitleChanged("hello world")]
    assert events.of(UsageUpdated)
    assert events[-1] == TurnEnded("end_turn")
    stored = await runtime.store.messages(session.id)
    assert [type(m) for m in stored] == [UserMessage, AssistantMessage]


async def test_tool_loop_runs_tools_and_feeds_results_back(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("the secret is 42\n")
    runtime = make_runtime(
        [
            {"thought": "look first", "toolCalls": [call("read_file", path="notes.txt")]},
            {"text": "It is 42."},
        ]
    )
    session = await runtime.new_session(tmp_path)
    events = Events()
    assert await run_turn(session, prompt("what?"), RecordingAsker(), events.append) == "end_turn"
    started = events.of(ToolCallStarted)[0]
    assert (started.tool, started.kind, started.title) == ("read_file", "read", "Read notes.txt")
    assert started.locations == [tmp_path / "notes.txt"]
    assert events.of(AgentThought) == [AgentThought("look first")]
    done = [e for e in events.of(ToolCallUpdated) if e.status == "completed"]
    assert done[0].content == "the secret is 42\n"
    result = next(m for m in session.window if isinstance(m, ToolResultMessage))
    assert result.content == "the secret is 42\n" and not result.is_error


async def test_approval_allow_runs_and_reject_does_not(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    runtime = make_runtime(
        [
            {"toolCalls": [call("write_file", path="a.txt", content="A")]},
            {"toolCalls": [call("write_file", path="b.txt", content="B")]},
            {"text": "done"},
        ]
    )
    session = await runtime.new_session(tmp_path)
    asker = RecordingAsker(decisions=["allow_once", "reject_once"])
    events = Events()
    await run_turn(session, prompt("write"), asker, events.append)
    assert (tmp_path / "a.txt").read_text() == "A"
    assert not (tmp_path / "b.txt").exists()
    assert [a.title for a in asker.approvals] == ["Write a.txt", "Write b.txt"]
    failed = [e for e in events.of(ToolCallUpdated) if e.status == "failed"]
    assert failed[0].content == "Rejected: not run."
    diff = next(e for e in events.of(ToolCallUpdated) if e.status == "completed").diff
    assert diff is not None and diff.old_text is None and diff.new_text == "A"


class SilentAsker(RecordingAsker):
    """Asks, and never hears back."""

    async def approve(self, request: ApprovalRequest) -> Decision:
        self.approvals.append(request)
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_the_model_is_told_when_no_answer_came_or_the_asking_was_cancelled(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    write = {"toolCalls": [call("write_file", path="a.txt", content="A")]}
    runtime = make_runtime([write, {"text": "ok"}] * 2, limits={"questionTimeoutS": 0.05})
    session = await runtime.new_session(tmp_path)
    await run_turn(session, prompt("one"), SilentAsker(), Events().append)
    cancelled = RecordingAsker(decisions=["cancelled"])  # type: ignore[list-item]
    await run_turn(session, prompt("two"), cancelled, Events().append)
    results = [m.content for m in session.window if isinstance(m, ToolResultMessage)]
    assert results[0].startswith("Not run: no one answered the approval request in time")
    assert results[1] == "Not run: the approval request was cancelled before anyone answered."
    assert not (tmp_path / "a.txt").exists()


async def test_always_decisions_are_remembered_for_the_session(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    runtime = make_runtime(
        [
            {
                "toolCalls": [
                    call("run_command", command="echo one"),
                    call("run_command", command="echo two"),
                    call("write_file", path="x", content="1"),
                    call("write_file", path="y", content="2"),
                ]
            },
            {"text": "ok"},
        ]
    )
    session = await runtime.new_session(tmp_path)
    asker = RecordingAsker(decisions=["allow_always", "reject_always"])
    events = Events()
    await run_turn(session, prompt("go"), asker, events.append)
    assert [a.tool for a in asker.approvals] == ["run_command", "write_file"]
    results = [m for m in session.window if isinstance(m, ToolResultMessage)]
    assert [r.is_error for r in results] == [False, False, True, True]
    assert "one" in results[0].content and "[exit code 0]" in results[0].content


async def test_an_approval_shows_what_the_call_will_do(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    (tmp_path / "old.txt").write_text("one\ntwo\n")
    runtime = make_runtime(
        [
            {"toolCalls": [call("write_file", path="new.txt", content="fresh\n")]},
            {"toolCalls": [call("edit_file", path="old.txt", old_text="two", new_text="2")]},
            {"toolCalls": [call("run_command", command="echo hi")]},
            {"toolCalls": [call("edit_file", path="old.txt", old_text="absent", new_text="x")]},
            {"text": "done"},
        ]
    )
    session = await runtime.new_session(tmp_path)
    asker = RecordingAsker(decisions=["reject_once"] * 4)
    await run_turn(session, prompt("go"), asker, Events().append)
    created, edited, command, failing = (a.preview for a in asker.approvals)
    assert created == FileDiff(tmp_path / "new.txt", None, "fresh\n")
    assert edited == FileDiff(tmp_path / "old.txt", "one\ntwo\n", "one\n2\n")
    assert command == f"$ echo hi\n(in {tmp_path})"
    assert failing is None  # the edit would fail, and says why when it runs
    assert preview_lines(edited) == [
        f"change to {tmp_path / 'old.txt'}",
        "@@ -1,2 +1,2 @@",
        " one",
        "-two",
        "+2",
    ]


async def test_read_tools_never_ask_and_modes_decide(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    modes = [
        {"id": "auto", "name": "Auto", "approvals": "auto"},
        {"id": "ro", "name": "RO", "approvals": "deny"},
    ]
    runtime = make_runtime(
        [
            {"toolCalls": [call("list_dir"), call("write_file", path="auto.txt", content="x")]},
            {"text": "ok"},
            {"toolCalls": [call("write_file", path="denied.txt", content="x")]},
            {"text": "ok"},
        ],
        modes=modes,
        defaultMode="auto",
    )
    session = await runtime.new_session(tmp_path)
    asker = RecordingAsker()
    await run_turn(session, prompt("one"), asker, Events().append)
    assert (tmp_path / "auto.txt").exists()
    await runtime.set_mode(session, "ro")
    await run_turn(session, prompt("two"), asker, Events().append)
    assert not (tmp_path / "denied.txt").exists()
    assert asker.approvals == []
    assert (await runtime.store.get(session.id)).mode == "ro"


async def test_a_faces_standing_policy_decides_after_the_mode(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    write = {"toolCalls": [call("write_file", path="w.txt", content="x")]}
    runtime = make_runtime(
        [write, {"text": "ok"}, write, {"text": "ok"}, write, {"text": "ok"}],
        modes=[{"id": "ask", "name": "Ask"}, {"id": "ro", "name": "RO", "approvals": "deny"}],
    )
    session = await runtime.new_session(tmp_path)
    asker = RecordingAsker(decisions=["allow_once"])
    denied = Events()
    await run_turn(session, prompt("a"), asker, denied.append, approvals="deny")
    assert not (tmp_path / "w.txt").exists() and asker.approvals == []  # nobody asked
    results = [m.content for m in session.window if isinstance(m, ToolResultMessage)]
    assert results and results[0].startswith("Not run: refused by policy")  # to the model
    shown = [e.content for e in denied.of(ToolCallUpdated) if e.status == "failed"]
    assert shown == [
        "Not run: the session's mode or the server's approval setting refuses it; no one was asked."
    ]
    await run_turn(session, prompt("b"), asker, Events().append, approvals="auto")
    assert (tmp_path / "w.txt").exists() and asker.approvals == []
    (tmp_path / "w.txt").unlink()
    await runtime.set_mode(session, "ro")  # the mode's own policy comes first
    await run_turn(session, prompt("c"), asker, Events().append, approvals="auto")
    assert not (tmp_path / "w.txt").exists()


async def test_mode_tool_filter_hides_tools(make_runtime: MakeRuntime, tmp_path: Path) -> None:
    modes = [{"id": "ro", "name": "RO", "tools": {"allow": ["read_*", "list_dir"]}}]
    runtime = make_runtime(
        [{"toolCalls": [call("run_command", command="true")]}, {"text": "k"}], modes=modes
    )
    session = await runtime.new_session(tmp_path)
    assert [t.name for t in session.offered_tools()] == ["read_file", "list_dir"]
    events = Events()
    await run_turn(session, prompt("x"), RecordingAsker(), events.append)
    failed = next(e for e in events.of(ToolCallUpdated) if e.status == "failed")
    assert "Unknown tool 'run_command'" in (failed.content or "")


async def test_ask_user_gets_the_answer(make_runtime: MakeRuntime, tmp_path: Path) -> None:
    runtime = make_runtime(
        [
            {"toolCalls": [call("ask_user", question="Which colour?", choices=["red", "blue"])]},
            {"toolCalls": [call("ask_user", question="Anything else?")]},
            {"text": "thanks"},
        ]
    )
    session = await runtime.new_session(tmp_path)
    asker = RecordingAsker(answers=["blue", None])
    await run_turn(session, prompt("paint"), asker, Events().append)
    assert asker.questions[0].choices == ("red", "blue")
    results = [m for m in session.window if isinstance(m, ToolResultMessage)]
    assert results[0].content == "blue"
    assert results[1].content == "no answer available" and results[1].is_error


async def test_max_steps_ends_with_max_turn_requests(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    steps = [{"toolCalls": [call("list_dir")]}] * 5
    runtime = make_runtime(steps, limits={"maxTurnSteps": 3})
    session = await runtime.new_session(tmp_path)
    events = Events()
    assert await run_turn(session, prompt("loop"), RecordingAsker(), events.append) == (
        "max_turn_requests"
    )
    assert len(events.of(ToolCallStarted)) == 3


async def test_invalid_arguments_and_failing_tools_go_back_to_the_model(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    runtime = make_runtime(
        [
            {
                "toolCalls": [
                    call("read_file", nope=1),
                    call("read_file", path="missing.txt"),
                    call("edit_file", path="missing.txt", old_text="a", new_text="b"),
                ]
            },
            {"text": "recovered"},
        ]
    )
    session = await runtime.new_session(tmp_path)
    events = Events()
    assert await run_turn(session, prompt("x"), RecordingAsker(["allow_once"]), events.append) == (
        "end_turn"
    )
    results = [m for m in session.window if isinstance(m, ToolResultMessage)]
    assert all(r.is_error for r in results)
    assert "Invalid arguments" in results[0].content and "path" in results[0].content
    assert "no such file" in results[1].content
    assert "".join(e.text for e in events.of(AgentText)) == "recovered"


async def test_cancel_kills_a_running_command_and_its_group(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    runtime = make_runtime(
        [
            {"toolCalls": [call("run_command", command=f"sleep 60 & echo $! > {pidfile}; wait")]},
            {"text": "never"},
        ],
        modes=[{"id": "auto", "name": "Auto", "approvals": "auto"}],
    )
    session = await runtime.new_session(tmp_path)
    events = Events()
    turn = asyncio.create_task(run_turn(session, prompt("sleep"), RecordingAsker(), events.append))
    pid = await pid_from(pidfile)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert session.cancel_turn()
    assert await asyncio.wait_for(turn, 5) == "cancelled"
    assert loop.time() - started < 2.0
    assert events[-1] == TurnEnded("cancelled")
    assert await ended([pid], 5)  # killed with its group: gone a moment after
    results = [m for m in session.window if isinstance(m, ToolResultMessage)]
    assert results and "Cancelled" in results[-1].content
    assert not session.is_busy


async def test_cancel_call_stops_one_tool_call_and_the_turn_goes_on(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    """What an editor's cancel of a delegated agent's child session does: that call ends
    cancelled (its command killed), the other finishes, and the model goes on."""
    pidfile = tmp_path / "pid"
    runtime = make_runtime(
        [
            {
                "toolCalls": [
                    call("run_command", command=f"sleep 60 & echo $! > {pidfile}; wait"),
                    call("run_command", command="echo done"),
                ]
            },
            {"text": "One was cancelled."},
        ],
        modes=[{"id": "auto", "name": "Auto", "approvals": "auto"}],
    )
    session = await runtime.new_session(tmp_path)
    events = Events()
    turn = asyncio.create_task(run_turn(session, prompt("two"), RecordingAsker(), events.append))
    pid = await pid_from(pidfile)
    sleeping = events.of(ToolCallStarted)[0].call_id
    assert session.cancel_call(sleeping) and not session.cancel_call("no-such-call")
    assert await asyncio.wait_for(turn, 10) == "end_turn"
    assert await ended([pid], 5)
    ends = {e.call_id: e for e in events.of(ToolCallUpdated) if e.status in ("completed", "failed")}
    assert ends[sleeping].status == "failed" and ends[sleeping].content == CANCELLED_RESULT
    results = [m for m in session.window if isinstance(m, ToolResultMessage)]
    assert [r.content for r in results] == [CANCELLED_RESULT, "done\n\n[exit code 0]"]
    assert "".join(e.text for e in events.of(AgentText)) == "One was cancelled."
    assert not session.cancel_call(sleeping)  # over


async def test_cancel_stops_the_model_stream_at_once(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    runtime = make_runtime([{"text": "slow", "delayMs": 60_000}])
    session = await runtime.new_session(tmp_path)
    started = turn_started(session)
    turn = asyncio.create_task(run_turn(session, prompt("x"), RecordingAsker(), Events().append))
    await asyncio.wait_for(started.wait(), 10)
    assert session.cancel_turn()
    assert await asyncio.wait_for(turn, 1) == "cancelled"


async def test_the_prompt_is_stored_before_the_turn_waits_for_the_model(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    """However its commit is grouped with the answer's, a prompt is in the store (for
    another process) by the time the model is thinking, a new session's too, which is
    stored claimed by its turn: no other process runs a turn beside it."""
    from raven.sessions import SqliteStore, TurnElsewhere

    runtime = make_runtime([{"text": "slow", "delayMs": 60_000}])
    session = await runtime.new_session(tmp_path, deferred=True)
    titled = asyncio.Event()
    events = Events()

    def emit(event: object) -> None:
        events.append(event)  # type: ignore[arg-type]
        if isinstance(event, TitleChanged):
            titled.set()  # after the prompt's write, before the model is asked

    turn = asyncio.create_task(run_turn(session, prompt("remember me"), RecordingAsker(), emit))
    await asyncio.wait_for(titled.wait(), 10)
    other = SqliteStore(runtime.paths.database)
    try:
        assert [m.text for m in other.messages(session.id)] == ["remember me"]  # type: ignore[union-attr]
        with pytest.raises(TurnElsewhere):
            other.claim_turn(session.id, os.getppid())  # a live process that is not this one
        assert session.cancel_turn()
        assert await asyncio.wait_for(turn, 10) == "cancelled"
        other.claim_turn(session.id, os.getppid())  # the turn let go of it
    finally:
        other.close()


async def test_provider_failure_ends_the_turn_with_an_explanation(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    runtime = make_runtime(
        models=[
            {"id": "bad", "provider": "openai", "baseUrl": "http://127.0.0.1:9/v1", "apiKey": "k"}
        ],
        defaultModel="bad",
    )
    session = await runtime.new_session(tmp_path)
    events = Events()
    import raven.providers.http as http

    http.BACKOFF_BASE_S, saved = 0.0, http.BACKOFF_BASE_S
    try:
        stop = await run_turn(session, prompt("x"), RecordingAsker(), events.append)
    finally:
        http.BACKOFF_BASE_S = saved
    assert stop == "end_turn"
    assert "cannot connect" in events.of(Notice)[0].text
    assert events[-1].error is not None  # type: ignore[union-attr]
    # The session keeps what its last turn failed with, until a turn ends well.
    assert session.record.failure == events[-1].error  # type: ignore[union-attr]
    assert (await runtime.get_session(session.id)).failure == session.record.failure
    await runtime.set_model(session, "echo")
    assert await run_turn(session, prompt("y"), RecordingAsker(), Events().append) == "end_turn"
    assert (await runtime.get_session(session.id)).failure is None


async def test_steering_joins_before_the_next_model_call(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    runtime = make_runtime(
        [
            {"text": "working", "waitFor": str(tmp_path / "gate"), "toolCalls": [call("list_dir")]},
            {"text": "steered"},
        ]
    )
    session = await runtime.new_session(tmp_path)
    assert session.steer("too early") is False
    started = turn_started(session)
    turn = asyncio.create_task(run_turn(session, prompt("x"), RecordingAsker(), Events().append))
    await asyncio.wait_for(started.wait(), 10)
    assert session.steer("also check README") is True
    (tmp_path / "gate").touch()  # the model answers its first call only now
    assert await turn == "end_turn"
    users = [m.text for m in session.window if isinstance(m, UserMessage)]
    assert users == ["x", "also check README"]


async def test_a_second_turn_on_a_busy_session_is_refused_and_cancel_turn_stops_the_first(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    runtime = make_runtime([{"text": "slow", "delayMs": 30_000}])
    session = await runtime.new_session(tmp_path)
    started = turn_started(session)
    first = asyncio.create_task(run_turn(session, prompt("a"), RecordingAsker(), Events().append))
    await asyncio.wait_for(started.wait(), 10)
    with pytest.raises(SessionBusy, match="already running"):
        await run_turn(session, prompt("b"), RecordingAsker(), Events().append)
    await session.stop_turn(10)
    assert await first == "cancelled"
    assert session.cancel_turn() is False


async def test_the_next_turn_answers_tool_calls_a_killed_process_left_open(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    from raven.messages import ToolCall, user_text

    runtime = make_runtime()
    record = await runtime.store.create(str(tmp_path), face="test", model="test")
    await runtime.store.append(record.id, user_text("go"))
    calls = [ToolCall(id="k1", name="run_command", arguments={"command": "sleep 9"})]
    await runtime.store.append(record.id, AssistantMessage(tool_calls=calls))
    session = await runtime.open_session(record.id)
    # Opening writes nothing: the call may still be running in another process.
    assert len(await runtime.store.messages(record.id)) == 2
    assert await run_turn(session, prompt("again"), RecordingAsker(), lambda e: None) == "end_turn"
    stored = await runtime.store.messages(record.id)
    result = stored[2]
    assert isinstance(result, ToolResultMessage) and result.call_id == "k1" and result.is_error
    assert [m.role for m in stored] == ["user", "assistant", "tool", "user", "assistant"]


async def test_update_plan_emits_the_whole_plan(make_runtime: MakeRuntime, tmp_path: Path) -> None:
    from raven.engine import PlanUpdated

    entries = [{"content": "read", "status": "completed"}, {"content": "write"}]
    runtime = make_runtime([{"toolCalls": [call("update_plan", entries=entries)]}, {"text": "ok"}])
    session = await runtime.new_session(tmp_path)
    events = Events()
    await run_turn(session, prompt("plan"), RecordingAsker(), events.append)
    (plan,) = events.of(PlanUpdated)
    assert [(s.content, s.status) for s in plan.steps] == [
        ("read", "completed"),
        ("write", "pending"),
    ]
    result = next(m for m in session.window if isinstance(m, ToolResultMessage))
    assert result.content == "Plan updated: 1/2 steps completed."


async def test_a_server_that_reports_no_usage_gets_an_estimate(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    from tests.fakes.model_server import FakeModelServer, Reply, openai_stream

    server = FakeModelServer().start()
    try:
        runtime = make_runtime(
            models=[
                {
                    "id": "local",
                    "provider": "openai",
                    "baseUrl": server.url + "/v1",
                    "contextWindow": 4096,
                }
            ],
            defaultModel="local",
        )
        server.queue(Reply(events=openai_stream(text="four words of answer", usage=None)))
        session = await runtime.new_session(tmp_path)
        events = Events()
        await run_turn(session, prompt("x" * 400), RecordingAsker(), events.append)
    finally:
        server.stop()
    (usage,) = events.of(UsageUpdated)
    assert usage.estimated and usage.context_window == 4096
    assert usage.used_tokens >= 100


async def test_history_replays_as_the_events_a_turn_emitted(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("hi\n")
    runtime = make_runtime(
        [{"toolCalls": [call("read_file", path="notes.txt")]}, {"text": "It says hi."}]
    )
    session = await runtime.new_session(tmp_path)
    live = Events()
    await run_turn(session, prompt("read it"), RecordingAsker(), live.append)
    stored = await runtime.store.messages(session.id)
    (called,) = [m for m in stored if isinstance(m, AssistantMessage) and m.tool_calls]
    assert (called.tool_calls[0].title, called.tool_calls[0].kind) == ("Read notes.txt", "read")
    replayed = await runtime.history(session.id)
    assert replayed[0] == TurnStarted((TextPart(text="read it"),))
    # locations are not stored: a replay shows the call as it was titled
    assert replayed[1] == dataclasses.replace(live.of(ToolCallStarted)[0], locations=[])
    done = next(e for e in live.of(ToolCallUpdated) if e.status == "completed")
    assert replayed[2] == ToolCallUpdated(done.call_id, "completed", done.content)
    assert replayed[3] == AgentText("It says hi.")
    page = await runtime.list_sessions(cwd=str(tmp_path))
    assert [r.id for r in page.sessions] == [session.id]
    renamed = await runtime.rename_session(session.id, "Reading")
    assert renamed.title == "Reading" and (await runtime.get_session(session.id)).title == "Reading"


async def test_the_texts_of_two_steps_read_as_two_paragraphs_live_and_replayed(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    steps = [
        {"text": "Let me look.", "toolCalls": [call("read_file", path="notes.txt")]},
        {"text": "Done looking."},
    ]
    (tmp_path / "notes.txt").write_text("x")
    runtime = make_runtime(steps)
    session = await runtime.new_session(tmp_path)
    events = Events()
    assert await run_turn(session, prompt("look"), RecordingAsker(), events.append) == "end_turn"
    live = "".join(e.text for e in events.of(AgentText))
    assert live == "Let me look.\n\nDone looking."
    replayed = await runtime.history(session.id)
    assert "".join(e.text for e in replayed if isinstance(e, AgentText)) == live
    stored = [m.text for m in session.window if isinstance(m, AssistantMessage)]
    assert stored == ["Let me look.", "Done looking."]  # the transcript keeps each step's own


async def test_a_turn_started_the_moment_the_last_one_ends_keeps_the_session(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    """Whoever hears a turn end may start the next at once (a queued follow-up): the
    ended turn's last steps must not free the session under the new one."""
    gate = tmp_path / "gate"
    runtime = make_runtime([{"text": "first"}, {"text": "second", "waitFor": str(gate)}])
    session = await runtime.new_session(tmp_path)
    nexts: list[asyncio.Task[str]] = []
    second = Events()

    def start_next(event: object) -> None:
        if isinstance(event, TurnEnded) and not nexts:
            nexts.append(start_turn(session, prompt("next"), RecordingAsker(), second.append))

    assert await run_turn(session, prompt("first"), RecordingAsker(), start_next) == "end_turn"
    assert session.is_busy  # the next turn holds the session
    with pytest.raises(SessionBusy):
        start_turn(session, prompt("a third beside it"), RecordingAsker(), second.append)
    assert session.cancel_turn() is True  # and a cancel reaches it
    assert await asyncio.wait_for(nexts[0], 10) == "cancelled"
    assert not session.is_busy
    assert second[-1] == TurnEnded("cancelled")
