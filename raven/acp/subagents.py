"""Delegated sub-agents as child sessions, for editors that show them (ACP's sub-agent
sessions, unstable schema: the editor's `clientCapabilities.subagents`).

Each `delegate` call of a turn becomes a child session of the parent: a `subagent_update`
on the parent announcing it (the agent's name as its title, the task as its description,
state `running`) before anything of the child; then the child's text, tool calls and
plan as ordinary updates under the child's session id; and one more `subagent_update` on
the parent when the call ends (state `idle`, stop reason `end_turn`, `cancelled` or
`error`). The child's own sub-agents are children of the child's session the same way
(announced on it, their doings under their own ids, idle when they end or the child
does). A delegate call's child session may be cancelled on its own (`capabilities.cancel`:
its call ends cancelled, the parent's turn goes on), and so may the child's own sub-agents
while the child lets them (it says so in theirs; the cancel is passed on to it). The
delegate call stays a tool call of the parent, without the child's progress in it. What
the child asks goes through the parent's own session, as before. Pure: events in,
(session id, update) pairs out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from raven.acp.protocol import tool_call
from raven.acp.translate import Update, chunk
from raven.engine import CANCELLED_RESULT, ToolCallStarted, ToolCallUpdated, TurnEnded, TurnEvent
from raven.jsonrpc import INTERNAL_ERROR
from raven.tools import (
    ChildPlan,
    ChildProgress,
    ChildSubagent,
    ChildText,
    ChildToolCall,
    clip,
)

DELEGATE = "delegate"
"""The tool whose calls are sub-agents' tasks."""
SUBAGENT_UPDATE = "subagent_update"
ERROR_CHARS = 500
"""How much of a failed call's result its child's error message carries."""


@dataclass
class _Child:
    session_id: str
    open: bool = True
    running: set[str] = field(default_factory=set)
    """Its own sub-agents announced and not idle, by the session it named them with."""
    known: set[str] = field(default_factory=set)
    """Its own sub-agents announced, ever."""
    cancellable: set[str] = field(default_factory=set)
    """Its own sub-agents it lets be cancelled on their own, now."""

    def within(self, subagent: str | None) -> str:
        """The session id the editor knows the child's own sub-agent by (the child's own
        for None)."""
        return self.session_id if subagent is None else f"{self.session_id}/{subagent}"

    def updates(self, detail: ChildProgress | None) -> list[tuple[str, Update]]:
        """What the child did, as updates of its session, or of one of its own
        sub-agents' (announced on the child's)."""
        if isinstance(detail, ChildSubagent):
            return [(self.session_id, self._announced(detail))]
        if detail is None:
            return []
        return [(self.within(detail.subagent), u) for u in _child_updates(detail)]

    def _announced(self, detail: ChildSubagent) -> Update:
        sub = detail.subagent
        update: Update = {"sessionUpdate": SUBAGENT_UPDATE, "sessionId": self.within(sub)}
        if sub not in self.known:
            self.known.add(sub)
            update["title"] = detail.agent.rsplit(" › ", 1)[-1]
            if detail.description:
                update["description"] = detail.description
        if detail.cancellable is not None:
            self.cancellable.discard(sub)
            update["capabilities"] = {"cancel": {}} if detail.cancellable else None
            if detail.cancellable:
                self.cancellable.add(sub)
        if detail.state is None:
            return update
        state: dict[str, object] = {"state": detail.state}
        if detail.state == "idle":
            self.running.discard(sub)
            self.cancellable.discard(sub)
            state["stopReason"] = detail.stop_reason or "end_turn"
        else:
            self.running.add(sub)
        return {**update, "state": state}

    def part(self, session_id: str) -> str | None:
        """Which of its own sub-agents the editor knows by `session_id`, if it may be
        cancelled on its own now."""
        return next((sub for sub in self.cancellable if self.within(sub) == session_id), None)

    def left_running(self) -> list[tuple[str, Update]]:
        """Its own sub-agents still running as it ends: idle, cancelled, on its session."""
        ended = [
            self._announced(ChildSubagent("", sub, "idle", "cancelled"))
            for sub in sorted(self.running)
        ]
        return [(self.session_id, u) for u in ended]


class ChildSessions:
    """The delegate calls of one parent session's turns, as child sessions."""

    def __init__(self, parent_id: str) -> None:
        self._parent = parent_id
        self._children: dict[str, _Child] = {}

    def updates(self, event: TurnEvent, usual: Update | None) -> list[tuple[str, Update]]:
        """What to send for `event`, with the session each update goes to; `usual` is the
        update the face sends for it without child sessions."""
        sent = [(self._parent, usual)] if usual is not None else []
        if isinstance(event, ToolCallStarted) and event.tool == DELEGATE:
            child = self._children[event.call_id] = _Child(f"{self._parent}/{event.call_id}")
            announced = {
                "sessionUpdate": SUBAGENT_UPDATE,
                "sessionId": child.session_id,
                "title": str(event.raw_input.get("agent", "")),
                "description": str(event.raw_input.get("task", "")),
                "capabilities": {"cancel": {}},
                "state": {"state": "running"},
            }
            return [*sent, (self._parent, announced)]
        if isinstance(event, ToolCallUpdated) and event.call_id in self._children:
            child = self._children[event.call_id]
            if event.status == "in_progress":  # the child's doing, in the child's session
                return child.updates(event.detail)
            if not child.open:
                return sent
            return [*child.left_running(), self._ended(child, event), *sent]
        if isinstance(event, TurnEnded):
            cancelled = [c for c in self._children.values() if c.open]
            self._children.clear()
            ended = [
                update
                for c in cancelled
                for update in (*c.left_running(), self._state(c, {"stopReason": "cancelled"}))
            ]
            return [*ended, *sent]
        return sent

    def cancellable(self, session_id: str) -> tuple[str, str | None] | None:
        """What a cancel of `session_id` stops: (the delegate call whose child session it
        is, None), or (that call, the child's own sub-agent it is); None if neither runs."""
        for call, child in self._children.items():
            if not child.open:
                continue
            if child.session_id == session_id:
                return call, None
            if (sub := child.part(session_id)) is not None:
                return call, sub
        return None

    def _ended(self, child: _Child, event: ToolCallUpdated) -> tuple[str, Update]:
        """The parent hears the child's end; the delegate call's own end follows."""
        if event.content == CANCELLED_RESULT:
            return self._state(child, {"stopReason": "cancelled"})
        if event.status == "failed":
            said = clip(event.content or "the sub-agent failed", ERROR_CHARS)
            error = {"code": INTERNAL_ERROR, "message": said}
            return self._state(child, {"stopReason": "error", "error": error})
        return self._state(child, {"stopReason": "end_turn"})

    def _state(self, child: _Child, idle: dict[str, object]) -> tuple[str, Update]:
        child.open = False
        update = {
            "sessionUpdate": SUBAGENT_UPDATE,
            "sessionId": child.session_id,
            "state": {"state": "idle", **idle},
        }
        return (self._parent, update)


def _child_updates(detail: ChildText | ChildPlan | ChildToolCall) -> list[Update]:
    """A delegate call's progress (what its child did) as updates of the session of the
    one who did it."""
    if isinstance(detail, ChildText):
        return [chunk("agent_message_chunk", detail.delta)] if detail.delta else []
    if isinstance(detail, ChildPlan):
        entries = [
            {"content": s.content, "status": s.status, "priority": "medium"} for s in detail.plan
        ]
        return [{"sessionUpdate": "plan", "entries": entries}]
    call_id, title, status = detail.tool_call_id, detail.title, detail.status
    if detail.kind is not None:
        started = {"sessionUpdate": "tool_call", **tool_call(call_id, title, detail.kind)}
        return [{**started, "status": status or "pending"}]
    changed = {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "title": title}
    return [{**changed, "status": status}]
