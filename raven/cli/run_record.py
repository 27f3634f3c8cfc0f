"""What `raven run` keeps of its turn for the end: the exit code's cause and, for
`--output json`, the summary it prints. Built as the events pass, never from a list of
them (a long answer is hundreds of thousands of events)."""

from __future__ import annotations

from typing import Any

from raven.engine import (
    AgentText,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEnded,
    TurnEvent,
    UsageUpdated,
)


class TurnRecord:
    """What the end of `raven run` needs from a turn's events, kept as they pass."""

    def __init__(self, keep_answer: bool) -> None:
        self._keep_answer = keep_answer
        self.answer: list[str] = []
        """The answer's text, when `keep_answer` (for `--output json`)."""
        self.calls: dict[str, dict[str, Any]] = {}
        self.usage: UsageUpdated | None = None
        self.ended: TurnEnded | None = None

    def add(self, event: TurnEvent) -> None:
        if isinstance(event, AgentText):
            if self._keep_answer:
                self.answer.append(event.text)
        elif isinstance(event, ToolCallStarted):
            self.calls[event.call_id] = {
                "id": event.call_id,
                "tool": event.tool,
                "title": event.title,
                "status": "pending",
            }
        elif isinstance(event, ToolCallUpdated):
            if event.call_id in self.calls and event.status != "in_progress":
                self.calls[event.call_id]["status"] = event.status
        elif isinstance(event, UsageUpdated):
            self.usage = event
        elif isinstance(event, TurnEnded):
            self.ended = event


def summary(
    record: TurnRecord, stop: str, session_id: str, model_id: str, spent: dict[str, Any]
) -> dict[str, Any]:
    """What `--output json` prints at the end: the answer and how the turn went; `spent`
    is the turn's usage totals (`raven.usage.as_json`), as `--usage` adds them up."""
    usage, ended = record.usage, record.ended
    return {
        "schema": "raven.run/1",
        "answer": "".join(record.answer),
        "stopReason": stop,
        "error": ended.error if ended else None,
        "sessionId": session_id,
        "model": model_id,
        "usage": None
        if usage is None
        else {
            "usedTokens": usage.used_tokens,
            "estimated": usage.estimated,
            "inputTokens": sum(m["inputTokens"] for m in spent["models"].values()),
            "outputTokens": sum(m["outputTokens"] for m in spent["models"].values()),
            **spent,
        },
        "toolCalls": list(record.calls.values()),
    }
