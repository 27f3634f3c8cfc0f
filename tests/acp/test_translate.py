"""Turn events become `session/update` payloads the official ACP schema accepts."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import schema

from raven.acp.translate import event_update, replay_updates
from raven.engine import (
    AgentText,
    AgentThought,
    CompactionText,
    CompactionUpdated,
    Notice,
    PlanUpdated,
    TitleChanged,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEnded,
    UsageUpdated,
    history_events,
)
from raven.messages import (
    AssistantMessage,
    CompactionMessage,
    ToolCall,
    ToolResultMessage,
    user_text,
)
from raven.tools import FileDiff, PlanStep
from tests.acp_schema import AcpSchema

EVENTS = [
    AgentText("hi"),
    AgentThought("hmm"),
    ToolCallStarted(
        "c1",
        "run_command",
        "Run `curl -H 'Authorization: Bearer abcdef123456'`",
        "execute",
        {"command": "echo sk-live-0123456789abcdefghij"},
        [Path("/w/a.txt")],
    ),
    ToolCallUpdated("c1", "in_progress"),
    ToolCallUpdated("c1", "completed", "done", FileDiff(Path("/w/a.txt"), None, "new")),
    ToolCallUpdated("c1", "failed", "token=supersecretvalue"),
    UsageUpdated(120, 8000),
    PlanUpdated(
        (PlanStep("read the code", "completed"), PlanStep("fix it", "in_progress", "high"))
    ),
    TitleChanged("A title"),
    Notice("the model is down"),
]


def valid(update: dict[str, object]) -> schema.SessionNotification:
    return schema.SessionNotification.model_validate({"sessionId": "s", "update": update})


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_every_event_translates_to_a_valid_update(event: object) -> None:
    update = event_update(event)  # type: ignore[arg-type]
    assert update is not None
    valid(update)


def test_usage_without_a_known_window_is_not_sent_and_turn_end_is_silent() -> None:
    assert event_update(UsageUpdated(10, None)) is None
    assert event_update(UsageUpdated(10, None), context_window=100) is not None
    assert event_update(TurnEnded("end_turn")) is None


def test_replay_covers_messages_tool_calls_and_results() -> None:
    history = [
        user_text("question"),
        AssistantMessage(
            text="let me look",
            thought="plan",
            tool_calls=[
                ToolCall(
                    id="t", name="notes__read", arguments={"path": "x"}, title="Read x", kind="read"
                )
            ],
        ),
        ToolResultMessage(call_id="t", name="notes__read", content="data", is_error=False),
    ]
    updates = list(replay_updates(history_events(history)))
    for update in updates:
        valid(update)
    kinds = [u["sessionUpdate"] for u in updates]
    assert kinds == [
        "user_message_chunk",
        "agent_thought_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call_update",
    ]
    # an MCP tool replays with the kind and title it was shown with, not "other"
    assert updates[3]["kind"] == "read" and updates[3]["title"] == "Read x"


def test_an_estimated_usage_says_so() -> None:
    exact = event_update(UsageUpdated(10, 100))
    estimated = event_update(UsageUpdated(10, 100, estimated=True))
    assert exact is not None and "_meta" not in exact
    assert estimated is not None and estimated["_meta"] == {"raven": {"estimated": True}}
    schema.SessionNotification.model_validate({"sessionId": "s", "update": estimated})


def test_a_compaction_is_a_notice_for_an_editor_that_shows_none_and_frames_for_one_that_does(
    acp_schema: AcpSchema,
) -> None:
    done = CompactionUpdated("cmp_1", "completed", "They fixed the bug.", None, 9000, 1200)
    steps = [CompactionUpdated("cmp_1", "in_progress"), CompactionText("cmp_1", "They"), done]
    plain = [event_update(e) for e in steps]
    assert plain[:2] == [None, None]  # nothing while it runs
    assert "9,000 → 1,200 tokens" in plain[2]["content"]["text"]  # type: ignore[index]
    valid(plain[2])  # type: ignore[arg-type]
    shown = [event_update(e, compaction=True) for e in steps]
    notes = [{"sessionId": "s", "update": u} for u in shown]
    read = acp_schema.read([("zSessionNotification", n, "stable") for n in notes])
    assert all("ok" in r for r in read), read  # schema 1.25, which has compactions
    assert [u["sessionUpdate"] for u in shown] == [  # type: ignore[index]
        "compaction_update",
        "compaction_summary_chunk",
        "compaction_update",
    ]
    assert shown[2]["summary"] == [{"type": "text", "text": "They fixed the bug."}]  # type: ignore[index]
    failed = event_update(CompactionUpdated("cmp_2", "failed", error="the model is down"))
    assert "Compaction failed: the model is down" in failed["content"]["text"]  # type: ignore[index]
    # Replayed to an editor that shows none, the summary stands for what it replaced.
    history = history_events(
        [CompactionMessage(id="cmp_1", summary="They fixed the bug.", kept_from=4)]
    )
    (replayed,) = replay_updates(history)
    assert "summarised): They fixed the bug." in replayed["content"]["text"]
