"""A delegate call as a child session: announced first (`subagent_update`, running), its
work in the child session, one idle state on the parent (end_turn, error or cancelled),
other events untouched."""

from __future__ import annotations

from typing import Any

from raven.acp.subagents import ChildSessions
from raven.acp.translate import event_update
from raven.engine import (
    CANCELLED_RESULT,
    AgentText,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEnded,
    TurnEvent,
)
from raven.tools import ChildPlan, ChildPlanStep, ChildText

DELEGATE = ToolCallStarted(
    "c1", "delegate", "Delegate to helper", "other", {"agent": "helper", "task": "t"}
)


def sent(children: ChildSessions, *events: TurnEvent) -> list[tuple[str, str]]:
    return [
        (session, update["sessionUpdate"])
        for event in events
        for session, update in children.updates(event, event_update(event))
    ]


def states(children: ChildSessions, *events: TurnEvent) -> list[Any]:
    return [
        update["state"]
        for event in events
        for _, update in children.updates(event, event_update(event))
        if update["sessionUpdate"] == "subagent_update"
    ]


def test_a_delegate_call_becomes_a_child_session_and_other_events_pass() -> None:
    children = ChildSessions("s")
    said = ToolCallUpdated(
        "c1", "in_progress", "helper: hi", detail=ChildText("helper", "hi", "hi")
    )
    plan = ToolCallUpdated(
        "c1",
        "in_progress",
        "helper plans",
        detail=ChildPlan("helper", (ChildPlanStep("a", "pending"),)),
    )
    assert sent(
        children,
        AgentText("first"),
        DELEGATE,
        said,
        plan,
        ToolCallUpdated("c1", "completed", "hi"),
        TurnEnded("end_turn"),
    ) == [
        ("s", "agent_message_chunk"),
        ("s", "tool_call"),
        ("s", "subagent_update"),
        ("s/c1", "agent_message_chunk"),
        ("s/c1", "plan"),
        ("s", "subagent_update"),
        ("s", "tool_call_update"),
    ]


def test_a_failed_a_cancelled_and_an_unfinished_call_each_end_once() -> None:
    running = {"state": "running"}
    failed = ChildSessions("s")
    assert states(
        failed, DELEGATE, ToolCallUpdated("c1", "failed", "boom"), TurnEnded("end_turn")
    ) == [
        running,
        {"state": "idle", "stopReason": "error", "error": {"code": -32603, "message": "boom"}},
    ]
    cancelled_idle = {"state": "idle", "stopReason": "cancelled"}
    cancelled = ChildSessions("s")
    stopped = ToolCallUpdated("c1", "failed", CANCELLED_RESULT)
    assert states(cancelled, DELEGATE, stopped, TurnEnded("cancelled")) == [
        running,
        cancelled_idle,
    ]
    unfinished = ChildSessions("s")
    assert states(unfinished, DELEGATE, TurnEnded("cancelled")) == [running, cancelled_idle]
