"""Turn events and a session's snapshot as ACP `session/update` payloads. Pure functions.

Redaction is not done here: every frame is redacted where it is written (`acp.stdio`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from raven.acp.protocol import diff_content, text_content, tool_call
from raven.engine import (
    AgentText,
    AgentThought,
    Answered,
    Asking,
    CompactionText,
    CompactionUpdated,
    HistoryEvent,
    LogEvent,
    ModeChanged,
    ModelChanged,
    Notice,
    PlanUpdated,
    SessionEnded,
    TitleChanged,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEvent,
    TurnStarted,
    UsageUpdated,
)
from raven.engine.codec import plain
from raven.messages import ImagePart, TextPart

REPLAY_MAX_MESSAGES = 500
REPLAY_MAX_TEXT_BYTES = 16 * 1024

Update = dict[str, Any]


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def chunk(kind: str, text: str) -> Update:
    return {"sessionUpdate": kind, "content": text_block(text)}


def event_update(
    event: TurnEvent, context_window: int | None = None, compaction: bool = False
) -> Update | None:
    """The `update` object for one turn event, or None when ACP has nothing to say;
    `compaction`: the editor declared `session.compaction` (else a compaction is told
    as a notice in the answer, once it has ended)."""
    if isinstance(event, AgentText):
        return chunk("agent_message_chunk", event.text)
    if isinstance(event, AgentThought):
        return chunk("agent_thought_chunk", event.text)
    if isinstance(event, ToolCallStarted):
        fields = tool_call(event.call_id, event.title, event.kind, event.raw_input, event.locations)
        return {"sessionUpdate": "tool_call", **fields}
    if isinstance(event, ToolCallUpdated):
        update: Update = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": event.call_id,
            "status": event.status,
        }
        if event.title is not None:
            update["title"] = event.title
        content: list[dict[str, Any]] = []
        if event.diff is not None:
            diff = event.diff
            content.append(diff_content(diff.path, diff.old_text, diff.new_text))
        if event.content:
            content.append(text_content(event.content))
        if content:
            update["content"] = content
        if event.detail is not None:
            update["_meta"] = {"raven": {"progress": plain(event.detail)}}
        return update
    if isinstance(event, PlanUpdated):
        return {
            "sessionUpdate": "plan",
            "entries": [
                {"content": s.content, "priority": s.priority, "status": s.status}
                for s in event.steps
            ],
        }
    if isinstance(event, UsageUpdated):
        size = event.context_window or context_window
        if not size:
            return None
        usage: Update = {"sessionUpdate": "usage_update", "used": event.used_tokens, "size": size}
        if event.estimated:
            usage["_meta"] = {"raven": {"estimated": True}}
        return usage
    if isinstance(event, TitleChanged):
        return {"sessionUpdate": "session_info_update", "title": event.title}
    if isinstance(event, Notice):
        return chunk("agent_message_chunk", f"\n\n⚠ {event.text}\n")
    if isinstance(event, CompactionUpdated | CompactionText):
        return _compaction(event) if compaction else _compaction_notice(event)
    return None


def _compaction(event: CompactionUpdated | CompactionText) -> Update:
    if isinstance(event, CompactionText):
        return {
            "sessionUpdate": "compaction_summary_chunk",
            "compactionId": event.compaction_id,
            "content": text_block(event.text),
        }
    update: Update = {
        "sessionUpdate": "compaction_update",
        "compactionId": event.compaction_id,
        "status": event.status,
    }
    if event.summary is not None:
        update["summary"] = [text_block(event.summary)]
    if event.error is not None:
        update["error"] = event.error
    if event.tokens_before is not None:
        sizes = {"tokensBefore": event.tokens_before, "tokensAfter": event.tokens_after}
        update["_meta"] = {"raven": {k: v for k, v in sizes.items() if v is not None}}
    return update


def _compaction_notice(event: CompactionUpdated | CompactionText) -> Update | None:
    """For an editor that shows no compactions: one line once it ended, in the answer."""
    if not isinstance(event, CompactionUpdated):
        return None
    if event.status == "completed":
        sizes = ""
        if event.tokens_before is not None and event.tokens_after is not None:
            sizes = f" (about {event.tokens_before:,} → {event.tokens_after:,} tokens)"
        said = f"Compacted: the model now sees a summary of the earlier conversation{sizes}."
        return chunk("agent_message_chunk", f"\n\n⚠ {said}\n")
    if event.status == "failed":
        return chunk("agent_message_chunk", f"\n\n⚠ Compaction failed: {event.error}\n")
    return None


def replay_updates(
    events: Iterable[HistoryEvent | LogEvent], compaction: bool = False
) -> Iterable[Update]:
    """A session's events (its snapshot) as updates, through the live translation, texts
    capped; the mode and model in force are told by the load's answer instead. A past
    compaction is replayed as one (`compaction`: the editor shows them) or as its
    summary in the answer."""
    for event in events:
        if isinstance(event, TurnStarted):
            for part in event.parts:
                text = part.text if isinstance(part, TextPart) else _image_note(part)
                yield chunk("user_message_chunk", _cap(text))
            continue
        if isinstance(event, ModeChanged | ModelChanged | SessionEnded | Asking | Answered):
            continue
        if isinstance(event, CompactionUpdated) and not compaction:
            # What came before is replayed no more: the summary stands for it.
            said = f"Earlier in this conversation (summarised): {event.summary}"
            yield chunk("agent_message_chunk", _cap(said) + "\n\n")
            continue
        if isinstance(event, AgentText | AgentThought):
            event = dataclasses.replace(event, text=_cap(event.text))
        elif isinstance(event, ToolCallUpdated) and event.content:
            event = dataclasses.replace(event, content=_cap(event.content))
        update = event_update(event, compaction=compaction)
        if update is not None:
            yield update


def _image_note(part: ImagePart) -> str:
    return f"[image: {part.mime_type}]"


def _cap(text: str) -> str:
    data = text.encode("utf-8")
    if len(data) <= REPLAY_MAX_TEXT_BYTES:
        return text
    cut = data[:REPLAY_MAX_TEXT_BYTES].decode("utf-8", "ignore")
    return cut + f"\n… [{len(data) - len(cut.encode())} bytes not replayed]"
