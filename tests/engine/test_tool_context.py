"""What a tool can do through its context: run beside others, report progress, ask approval,
and keep per-session resources a tool source releases."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

from raven.config import Paths, RavenConfig
from raven.engine import Runtime, ToolCallStarted, ToolCallUpdated, run_turn
from raven.messages import TextPart, ToolResultMessage
from raven.tools import ChildToolCall, Permission, Progress, Tool, ToolContext, ToolOutput
from raven.tools.base import Args, BuiltinTool
from tests.engine.conftest import Events, RecordingAsker

DEADLINE_S = 10


class NameArgs(Args):
    name: str


class Rendezvous(BuiltinTool):
    """`wait_for(name)` returns once `arrive(name)` ran: only concurrent calls can meet."""

    name: ClassVar[str] = "wait_for"
    description: ClassVar[str] = "wait"
    kind: ClassVar[Any] = "read"
    needs_approval: ClassVar[bool] = False
    args_model = NameArgs

    def __init__(self, arrived: dict[str, asyncio.Event]) -> None:
        self._arrived = arrived

    async def run(self, args: NameArgs, ctx: ToolContext) -> ToolOutput:
        async with asyncio.timeout(DEADLINE_S):
            await self._arrived.setdefault(args.name, asyncio.Event()).wait()
        return ToolOutput(f"met {args.name}")


class Arrive(Rendezvous):
    name: ClassVar[str] = "arrive"

    async def run(self, args: NameArgs, ctx: ToolContext) -> ToolOutput:
        self._arrived.setdefault(args.name, asyncio.Event()).set()
        return ToolOutput(f"arrived {args.name}")


class Delegating(BuiltinTool):
    """Reports progress, then asks approval for a child's action under a key of its own."""

    name: ClassVar[str] = "delegating"
    description: ClassVar[str] = "delegate"
    kind: ClassVar[Any] = "other"
    needs_approval: ClassVar[bool] = False
    args_model = NameArgs
    seen_sessions: ClassVar[list[str]] = []

    async def run(self, args: NameArgs, ctx: ToolContext) -> ToolOutput:
        Delegating.seen_sessions.append(ctx.session_id)
        reading = ChildToolCall("child", "t1", "read notes.txt", "in_progress", "read")
        ctx.progress(Progress("child is reading", reading))
        decision = await ctx.approve(
            Permission(
                key=f"child/{args.name}",
                title=f"Child wants to {args.name}",
                kind="edit",
                offered=("allow_once", "allow_always", "reject_once"),
                person=args.name.startswith("escalated"),
            )
        )
        return ToolOutput(decision or "no answer")


class Source:
    def __init__(self, tools: list[Tool]) -> None:
        self._tools = tools
        self.released: list[str] = []

    async def tools(self) -> tuple[list[Tool], list[str]]:
        return self._tools, []

    async def release(self, session_id: str) -> None:
        self.released.append(session_id)

    async def aclose(self) -> None:
        return None


def runtime_with(
    tmp_path: Path, source: Source, steps: list[dict[str, Any]], **cfg: Any
) -> Runtime:
    import json

    (tmp_path / "script.json").write_text(json.dumps(steps))
    config = RavenConfig.model_validate(
        {"models": [{"id": "s", "provider": "scripted", "script": "script.json"}], **cfg}
    )
    paths = Paths(tmp_path / "config.json", tmp_path / "data")
    return Runtime(config, paths, face="test", tool_sources=[source])


def call(tool: str, **arguments: object) -> dict[str, object]:
    return {"name": tool, "arguments": arguments}


async def test_calls_of_one_step_run_together_and_results_keep_the_models_order(
    tmp_path: Path,
) -> None:
    arrived: dict[str, asyncio.Event] = {}
    source = Source([Rendezvous(arrived), Arrive(arrived)])
    steps = [
        {
            "toolCalls": [
                call("wait_for", name="b"),
                call("wait_for", name="a"),
                call("arrive", name="a"),
                call("arrive", name="b"),
            ]
        },
        {"text": "done"},
    ]
    runtime = runtime_with(tmp_path, source, steps)
    try:
        session = await runtime.new_session(tmp_path)
        events = Events()
        stop = await run_turn(session, [TextPart(text="go")], RecordingAsker(), events.append)
        results = [m for m in session.window if isinstance(m, ToolResultMessage)]
    finally:
        await runtime.aclose()
    assert stop == "end_turn"
    assert [r.content for r in results] == ["met b", "met a", "arrived a", "arrived b"]
    assert all(not r.is_error for r in results)


async def test_progress_and_approval_go_through_the_engine(tmp_path: Path) -> None:
    source = Source([Delegating()])
    steps = [
        {"toolCalls": [call("delegating", name="write")]},
        {"toolCalls": [call("delegating", name="write")]},
        {"toolCalls": [call("delegating", name="delete")]},
        {"text": "done"},
    ]
    runtime = runtime_with(tmp_path, source, steps)
    asker = RecordingAsker(decisions=["allow_always", "reject_always"])
    try:
        session = await runtime.new_session(tmp_path)
        events = Events()
        await run_turn(session, [TextPart(text="go")], asker, events.append)
        results = [m.content for m in session.window if isinstance(m, ToolResultMessage)]
        session_id = session.id
        await runtime.close_session(session_id)
    finally:
        await runtime.aclose()
    progress = [e for e in events.of(ToolCallUpdated) if e.status == "in_progress" and e.content]
    assert progress and progress[0].content == "child is reading"
    assert progress[0].detail == ChildToolCall(
        "child", "t1", "read notes.txt", "in_progress", "read"
    )
    started = events.of(ToolCallStarted)[0]
    assert progress[0].call_id == started.call_id
    # asked once for "write" (remembered as always), then "delete" was not offered
    # reject_always, so the answer became the closest offered choice
    assert [a.tool for a in asker.approvals] == ["child/write", "child/delete"]
    assert asker.approvals[0].offered == ("allow_once", "allow_always", "reject_once")
    assert results == ["allow_always", "allow_always", "reject_once"]
    assert Delegating.seen_sessions[-1] == session_id
    assert source.released[0] == session_id


async def test_a_mode_decides_tool_approvals_too(tmp_path: Path) -> None:
    source = Source([Delegating()])
    steps = [{"toolCalls": [call("delegating", name="write")]}, {"text": "done"}]
    modes = [{"id": "auto", "name": "Auto", "approvals": "auto"}]
    runtime = runtime_with(tmp_path, source, steps, modes=modes, defaultMode="auto")
    asker = RecordingAsker()
    try:
        session = await runtime.new_session(tmp_path)
        await run_turn(session, [TextPart(text="go")], asker, lambda e: None)
        results = [m.content for m in session.window if isinstance(m, ToolResultMessage)]
    finally:
        await runtime.aclose()
    assert results == ["allow_once"] and asker.approvals == []


async def test_an_escalated_request_reaches_the_person_even_in_an_auto_mode(
    tmp_path: Path,
) -> None:
    source = Source([Delegating()])
    steps = [{"toolCalls": [call("delegating", name="escalated rm")]}, {"text": "done"}]
    modes = [
        {"id": "auto", "name": "Auto", "approvals": "auto"},
        {"id": "deny", "name": "Deny", "approvals": "deny"},
    ]
    runtime = runtime_with(tmp_path, source, steps * 2, modes=modes, defaultMode="auto")
    asker = RecordingAsker(decisions=["reject_once"])
    try:
        session = await runtime.new_session(tmp_path)
        await run_turn(session, [TextPart(text="go")], asker, lambda e: None)
        await runtime.set_mode(session, "deny")  # a deny mode still refuses, asking no one
        await run_turn(session, [TextPart(text="again")], asker, lambda e: None)
        results = [m.content for m in session.window if isinstance(m, ToolResultMessage)]
    finally:
        await runtime.aclose()
    assert [a.person for a in asker.approvals] == [True]
    assert results == ["reject_once", "no answer"]


async def test_cancel_stops_every_running_call(tmp_path: Path) -> None:
    arrived: dict[str, asyncio.Event] = {}
    source = Source([Rendezvous(arrived)])
    steps = [{"toolCalls": [call("wait_for", name="x"), call("wait_for", name="y")]}]
    runtime = runtime_with(tmp_path, source, steps)
    try:
        session = await runtime.new_session(tmp_path)
        events = Events()
        turn = asyncio.create_task(
            run_turn(session, [TextPart(text="go")], RecordingAsker(), events.append)
        )
        async with asyncio.timeout(DEADLINE_S):
            while len([e for e in events.of(ToolCallUpdated) if e.status == "in_progress"]) < 2:
                await asyncio.sleep(0.01)
        assert session.cancel_turn()
        assert await asyncio.wait_for(turn, DEADLINE_S) == "cancelled"
        results = [m for m in session.window if isinstance(m, ToolResultMessage)]
    finally:
        await runtime.aclose()
    assert len(results) == 2 and all(r.is_error for r in results)
    failed = [e for e in events.of(ToolCallUpdated) if e.status == "failed"]
    assert len(failed) == 2
