"""A stored transcript as the events a live turn emits, so every face replays with its own
live translator, and what a transcript a killed turn left lacks. Pure; never touches the
store."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import get_args

from raven.engine.events import (
    PARAGRAPH,
    AgentText,
    AgentThought,
    CompactionUpdated,
    ToolCallStarted,
    ToolCallUpdated,
    ToolStatus,
    TurnEvent,
    TurnStarted,
)
from raven.messages import (
    INTERRUPTED_RESULT,
    AssistantMessage,
    CompactionMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    shown,
)
from raven.tools import ToolKind

HistoryEvent = TurnStarted | TurnEvent
_KINDS = frozenset(get_args(ToolKind))


def history_events(messages: Sequence[Message]) -> Iterator[HistoryEvent]:
    """Each message as the events that showed it: a prompt, thought, text, tool calls,
    results (a later step's text led by `PARAGRAPH`, as it was shown live), compactions."""
    spoke = False
    for message in messages:
        if isinstance(message, UserMessage):
            spoke = False
            yield TurnStarted(tuple(message.parts))
        elif isinstance(message, AssistantMessage):
            if message.thought:
                yield AgentThought(message.thought)
            if message.text:
                yield AgentText((PARAGRAPH if spoke else "") + message.text)
                spoke = True
            for call in message.tool_calls:
                yield _started(call)
        elif isinstance(message, ToolResultMessage):
            status: ToolStatus = "failed" if message.is_error else "completed"
            yield ToolCallUpdated(message.call_id, status, shown(message.content))
        elif isinstance(message, CompactionMessage):
            yield CompactionUpdated(message.id, "completed", message.summary)


def _started(call: ToolCall) -> ToolCallStarted:
    """Calls are stored with their title and kind (older ones were given them by a migration)."""
    kind: ToolKind = call.kind if call.kind in _KINDS else "other"  # type: ignore[assignment]
    return ToolCallStarted(call.id, call.name, call.title or call.name, kind, call.arguments)


def interrupted_results(history: Sequence[Message]) -> list[ToolResultMessage]:
    """Results for tool calls a killed process left unanswered, so providers accept the history."""
    answered = {m.call_id for m in history if isinstance(m, ToolResultMessage)}
    return [
        ToolResultMessage(call_id=c.id, name=c.name, content=INTERRUPTED_RESULT, is_error=True)
        for m in history
        if isinstance(m, AssistantMessage)
        for c in m.tool_calls
        if c.id not in answered
    ]
