"""A session whose turns another agent answers in Raven's place (`raven.engine.stand_in`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from raven.engine import (
    AgentText,
    LiveSession,
    Notice,
    PlanUpdated,
    Reply,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEnded,
    UsageUpdated,
    run_turn,
    start_turn,
)
from raven.messages import AssistantMessage, TextPart, TokenUsage, UserMessage
from raven.tools import (
    ChildPlan,
    ChildPlanStep,
    ChildText,
    ChildToolCall,
    Permission,
    Progress,
    ToolContext,
    ToolError,
)
from tests.engine.conftest import Events, MakeRuntime, RecordingAsker


class Scripted:
    """A stand-in that works as a served agent does: speaks, runs a tool call it asks
    permission for, plans, and answers; or fails, or works until it is cancelled."""

    name = "helper"

    def __init__(self, behaviour: str = "answer") -> None:
        self.behaviour = behaviour
        self.prompts: list[tuple[str, str]] = []
        self.working = asyncio.Event()

    async def answer(self, prompt: str, ctx: ToolContext, speak: Callable[[str], None]) -> Reply:
        self.prompts.append((ctx.session_id, prompt))
        if self.behaviour == "fail":
            raise ToolError("sub-agent helper exited with code 1")
        speak("Running the ")
        speak("tests. ")
        if self.behaviour == "work":
            self.working.set()
            await asyncio.Event().wait()
        start = ChildToolCall("helper", "c1", "Run make", "pending", "execute")
        ctx.progress(Progress("helper: → Run make", start))
        plan = ChildPlan("helper", (ChildPlanStep("make", "in_progress"),))
        ctx.progress(Progress("helper plans", plan))
        grand = ChildToolCall("helper › w", "c1", "Read a", "completed", "read", subagent="w")
        ctx.progress(Progress("", grand))
        ctx.progress(Progress("w: hi", ChildText("helper › w", "hi", "hi", subagent="w")))
        decision = await ctx.approve(
            Permission("helper:execute", "helper: Run make", "execute", {"command": "make"})
        )
        status = "completed" if decision in ("allow_once", "allow_always") else "failed"
        ctx.progress(Progress("", ChildToolCall("helper", "c1", "Run make", status)))
        speak(f"Outcome {decision}.")
        usage = TokenUsage(by="helper", input_tokens=10, output_tokens=4)
        answer = f"Running the tests. Outcome {decision}.\n\nchanges on a branch"
        return Reply(answer, "end_turn", usage)


def prompt(text: str) -> list[TextPart]:
    return [TextPart(text=text)]


async def served(make_runtime: MakeRuntime, tmp_path: Path, stand_in: Scripted) -> LiveSession:
    runtime = make_runtime()
    return await runtime.new_session(tmp_path, answered_by=stand_in)


async def test_the_stand_ins_words_are_the_answer_and_its_work_the_turns(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    helper = Scripted()
    session = await served(make_runtime, tmp_path, helper)
    asker = RecordingAsker(decisions=["allow_once"])
    events = Events()
    assert await run_turn(session, prompt("test it"), asker, events.append) == "end_turn"
    assert helper.prompts == [(session.id, "test it")]
    said = "".join(e.text for e in events.of(AgentText))
    assert said == "Running the tests. Outcome allow_once.\n\nchanges on a branch"
    # Its permission request was the turn's: asked of the face, as a tool's is.
    (asked,) = asker.approvals
    assert (asked.title, asked.kind) == ("helper: Run make", "execute")
    starts = events.of(ToolCallStarted)
    assert [(s.call_id, s.title, s.kind) for s in starts] == [
        ("c1", "Run make", "execute"),
        ("w/c1", "helper › w: Read a", "read"),  # its own sub-agent's, under both names
    ]
    ends = [(e.call_id, e.status) for e in events.of(ToolCallUpdated) if e.status != "in_progress"]
    assert ends == [("w/c1", "completed"), ("c1", "completed")]
    assert [s.content for s in events.of(PlanUpdated)[0].steps] == ["make"]
    assert events.of(UsageUpdated)[-1].input_tokens == 10
    assert events[-1] == TurnEnded("end_turn")
    stored = await session.store.messages(session.id)
    assert [type(m) for m in stored] == [UserMessage, AssistantMessage]
    assert isinstance(stored[1], AssistantMessage) and stored[1].text == said


async def test_a_stand_in_that_cannot_answer_ends_the_turn_with_its_reason(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    session = await served(make_runtime, tmp_path, Scripted("fail"))
    events = Events()
    assert await run_turn(session, prompt("go"), RecordingAsker(), events.append) == "end_turn"
    assert events.of(Notice) == [Notice("sub-agent helper exited with code 1")]
    assert events[-1] == TurnEnded("end_turn", error="sub-agent helper exited with code 1")


async def test_cancelling_the_turn_cancels_the_stand_in_and_keeps_what_it_said(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    helper = Scripted("work")
    session = await served(make_runtime, tmp_path, helper)
    events = Events()
    turn = start_turn(session, prompt("go"), RecordingAsker(), events.append)
    async with asyncio.timeout(10):
        await helper.working.wait()
    assert session.cancel_turn()
    assert await asyncio.wait_for(turn, 10) == "cancelled"
    stored = await session.store.messages(session.id)
    assert isinstance(stored[-1], AssistantMessage)
    assert stored[-1].text == "Running the tests. "


async def test_a_session_an_agent_answers_needs_no_model(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    runtime = make_runtime(models=[], defaultModel=None)
    session = await runtime.new_session(tmp_path, answered_by=Scripted())
    events = Events()
    await run_turn(session, prompt("go"), RecordingAsker(["allow_once"]), events.append)
    assert events[-1] == TurnEnded("end_turn")
