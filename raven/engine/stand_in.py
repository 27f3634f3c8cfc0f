"""Another agent answering a session's turns in Raven's place (`raven a2a serve --agent`).

A `StandIn` takes the turn's prompt and answers it as Raven's model would: its own text
streams as the turn's answer, its tool calls and plan are the turn's, its permission
requests go through the turn's approvals (the session's mode, the face's policy, the
person). `Relay` turns what it reports into the turn's events. Knows no protocol: the
stand-in is given as this interface (`raven.acp_client.ServedAgent` implements it).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from raven.engine.events import (
    AgentText,
    Emit,
    PlanUpdated,
    ToolCallStarted,
    ToolCallUpdated,
)
from raven.errors import RavenError
from raven.messages import TokenUsage
from raven.providers import StopReason
from raven.safe_chunks import SafeChunks
from raven.tools import (
    ChildPlan,
    ChildToolCall,
    PlanStep,
    Progress,
    ToolContext,
    ToolKind,
)
from raven.tools.base import StepStatus

_KINDS: dict[str | None, ToolKind] = {k: k for k in ("read", "edit", "execute", "fetch")}
_STEPS: dict[str, StepStatus] = {s: s for s in ("pending", "in_progress", "completed")}


class StandInFailed(RavenError):
    """The stand-in could not answer (it would not start, died, refused the task): the
    turn ends with it as its error, as with a failed model call."""


@dataclass(frozen=True)
class Reply:
    """A stand-in's answer to one turn."""

    text: str
    stop_reason: StopReason
    usage: TokenUsage | None = None


class StandIn(Protocol):
    """An agent that answers turns in Raven's place, with one conversation of its own per
    session."""

    name: str

    async def answer(self, prompt: str, ctx: ToolContext, speak: Callable[[str], None]) -> Reply:
        """Answer `prompt` in the session `ctx.session_id`; what it says goes to `speak`
        as it comes; cancelling the call stops it. Raises `ToolError` when it cannot."""
        ...


class Relay:
    """What a stand-in says and does, as the turn's events: its text (cut where no
    credential straddles two pieces), its own tool calls and plan; what its own
    sub-agents do shows as tool calls under their names."""

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self._text = SafeChunks()
        self._started: set[str] = set()
        self._said = io.StringIO()

    def speak(self, text: str) -> None:
        self._said.write(text)
        if piece := self._text.feed(text):
            self._emit(AgentText(piece))

    def end(self, reply: Reply) -> str:
        """What the stand-in said, whole, once it answered `reply`: its words as they came,
        and what the reply adds after them (where a one-shot command's answer, or the
        changes a task left on a branch, are)."""
        if piece := self._text.flush():
            self._emit(AgentText(piece))
        said = self._said.getvalue()
        if reply.text.startswith(said) and (rest := reply.text[len(said) :]):
            self._emit(AgentText(rest))
            return reply.text
        return said

    def progress(self, update: Progress) -> None:
        detail = update.detail
        if isinstance(detail, ChildToolCall):
            self._call(detail)
        elif isinstance(detail, ChildPlan) and detail.subagent is None:
            steps = tuple(PlanStep(s.content, _STEPS.get(s.status, "pending")) for s in detail.plan)
            self._emit(PlanUpdated(steps))
        # Its own sub-agents' words (`ChildText`) are theirs, never the turn's answer.

    def _call(self, call: ChildToolCall) -> None:
        call_id = f"{call.subagent}/{call.tool_call_id}" if call.subagent else call.tool_call_id
        title = call.title if call.subagent is None else f"{call.agent}: {call.title}"
        if call_id not in self._started:
            self._started.add(call_id)
            kind = _KINDS.get(call.kind, "other")
            self._emit(ToolCallStarted(call_id, call.agent, title, kind, {}))
        if call.status == "completed":
            self._emit(ToolCallUpdated(call_id, "completed", title=title))
        elif call.status == "failed":
            self._emit(ToolCallUpdated(call_id, "failed", title=title))
        elif call.status is not None:
            self._emit(ToolCallUpdated(call_id, "in_progress", title=title))
