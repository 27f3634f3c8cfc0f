"""One task a sub-agent runs, as Raven follows it: who speaks in it (the child and the
sub-agents it announced), what they say and do as progress for the faces, the child's
answer, and whether the task is settled (none of its sub-agents runs, nothing it asked
waits). Knows ACP's update shapes (`raven.acp.protocol`); never sends anything to the
child, which `SubAgent` alone does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from raven.acp import protocol as p
from raven.redact import redact
from raven.safe_chunks import SafeChunks
from raven.tools import (
    Capped,
    ChildPlan,
    ChildPlanStep,
    ChildSubagent,
    ChildText,
    ChildToolCall,
    Decision,
    Permission,
    Progress,
    Question,
)

MAX_ANSWER_CHARS = 60_000
SAID_CHARS = 2_000
TELL_EVERY_CHARS = 80
"""The child's text reaches the faces at each line's end, or after this many characters."""
PROGRESS_LINE_CHARS = 120


@dataclass
class Voice:
    """One session's speaker in a turn: the child, or one of its own sub-agents."""

    name: str
    """What progress calls it: the agent's name (`helper`, `helper › writer`)."""
    session: str | None = None
    """Its session, for one of the child's own sub-agents (None: the child itself)."""
    cancellable: bool = False
    """The child may cancel it on its own (it said so in its `capabilities`)."""
    titles: dict[str, str] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    calls: dict[str, p.ToolCallStart] = field(default_factory=dict)
    """Its tool calls as it started them, by id: what a request names by id only."""
    said: str = ""
    """The end of its text so far (`SAID_CHARS`), for the faces to show."""
    untold: int = 0
    """Characters it said since the faces were last told."""
    unsent: str = ""
    """What it said since the faces were last told, as far as `safe` let it out (its end,
    `SAID_CHARS`, when it floods)."""
    safe: SafeChunks = field(default_factory=SafeChunks)


@dataclass
class Turn:
    """One task a child runs: who speaks in it, what they say and do as the faces see it
    (progress), the answer, the decisions taken, and whether it is settled."""

    progress: Callable[[Progress], None]
    approve: Callable[[Permission], Awaitable[Decision | None]] | None
    ask: Callable[[Question], Awaitable[str | None]] | None
    own: Voice
    speak: Callable[[str], None] | None = None
    """Where the child's own text goes as it comes, when it is a turn's answer (a served
    agent) rather than progress of a delegated task."""
    answer: Capped = field(default_factory=lambda: Capped(MAX_ANSWER_CHARS))
    """The child's text, clipped as it streams (head and tail kept)."""
    decisions: list[str] = field(default_factory=list)
    others: dict[str, Voice] = field(default_factory=dict)
    """The child's own sub-agents, by the session id its `subagent_update` announced: what
    they do is progress, never the child's answer."""
    running: set[str] = field(default_factory=set)
    """Those of `others` not yet announced idle."""
    asking: int = 0
    """The child's requests (permissions, questions) Raven is still answering."""
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    """Set while none of `others` runs and no request is being answered."""

    def __post_init__(self) -> None:
        self.settled.set()

    def settle(self) -> None:
        if self.running or self.asking:
            self.settled.clear()
        else:
            self.settled.set()

    def subagent(self, announced: p.SubagentUpdate) -> None:
        """The child started one of its own sub-agents, or one changed: from its
        announcement on, that session's updates are progress, under both names
        (`helper › writer`). An update is partial (codex sends its title, capabilities and
        cwd in updates of their own): a state it does not give is unchanged, and one first
        announced without a state is running."""
        sid, state, cancellable = announced.session_id, announced.state, announced.cancellable()
        voice = self.others.get(sid)
        if cancellable is not None and voice is not None and cancellable != voice.cancellable:
            voice.cancellable = cancellable
            self.progress(
                Progress(detail=ChildSubagent(voice.name, sid, None, cancellable=cancellable))
            )
        if voice is None:
            title = announced.title or sid
            voice = self.others[sid] = Voice(f"{self.own.name} › {title}", session=sid)
            voice.cancellable = bool(cancellable)
        elif state is None:
            return
        now = state.state if state is not None else "running"
        if now != "idle":
            if sid in self.running and now == "running":
                return
            said = announced.description or "started"
            if sid in self.running:
                said = "waits for an answer" if now == "requires_action" else now
            self.running.add(sid)
            self.settle()
            changed = ChildSubagent(
                voice.name, sid, now, None, announced.description, voice.cancellable or None
            )
            self.progress(Progress(f"{voice.name}: {said}", changed))
            return
        self.running.discard(sid)
        self.settle()
        voice.unsent += voice.safe.flush()
        if voice.untold:
            self.tell_text(voice)
        ended = ChildSubagent(voice.name, sid, "idle", state.stop_reason if state else None)
        self.progress(Progress(f"{voice.name}: ended ({ended.stop_reason or 'idle'})", ended))

    def message(self, message: p.SessionMessage) -> None:
        """A message between the child's sessions, as progress: from whom, to whom, its
        first line."""

        def who(session_id: str | None) -> str:
            voice = self.others.get(session_id) if session_id is not None else None
            return voice.name if voice is not None else self.own.name

        lines = [line.strip() for line in message.text().splitlines() if line.strip()]
        if lines:
            sender, recipient = who(message.sender_session_id), who(message.recipient_session_id)
            said = f"{sender} → {recipient}: {lines[0][:PROGRESS_LINE_CHARS]}"
            self.progress(Progress(redact(said)))

    def tell_text(self, voice: Voice) -> None:
        """What `voice` says, as progress: its latest line, the end of its text, and what it
        said since the last time (`delta`, cut where no credential straddles two)."""
        voice.untold = 0
        lines = [line for line in voice.said.splitlines() if line.strip()]
        latest = lines[-1].strip()[:PROGRESS_LINE_CHARS] if lines else ""
        detail = ChildText(voice.name, redact(voice.said), redact(voice.unsent), voice.session)
        voice.unsent = ""
        self.progress(Progress(redact(f"{voice.name}: {latest}"), detail))

    def relay(self, update: p.ChildUpdate, voice: Voice) -> None:
        """What `voice` does: the child's own text forms the answer; tool calls, plans and
        its sub-agents' text are progress."""
        name = voice.name
        if isinstance(update, p.TextChunk):
            if (text := update.text) is not None:
                if voice is self.own:
                    self.answer.add(text.encode())
                    if self.speak is not None:
                        self.speak(text)
                        return
                shown = text
                if len(text) > SAID_CHARS:  # a flood: the faces get its end
                    voice.unsent += voice.safe.flush() + "…"
                    shown = _tail(text, SAID_CHARS)
                voice.unsent = _tail(voice.unsent + voice.safe.feed(shown), SAID_CHARS)
                voice.said = (voice.said + text)[-SAID_CHARS:]
                voice.untold += len(text)
                if "\n" in text or voice.untold >= TELL_EVERY_CHARS:
                    self.tell_text(voice)
        elif isinstance(update, p.ToolCallStart):
            call_id, title = update.tool_call_id, update.title
            voice.titles[call_id], voice.kinds[call_id] = title, update.kind
            voice.calls[call_id] = update
            detail = ChildToolCall(name, call_id, title, update.status, update.kind, voice.session)
            self.progress(Progress(f"{name}: → {title}", detail, step=f"{name}: {title}"))
        elif isinstance(update, p.ToolCallChange):
            call_id, renamed = update.tool_call_id, update.title
            if renamed and renamed != voice.titles.get(call_id):
                voice.titles[call_id] = renamed  # the real title replaces a placeholder
            if update.kind is not None:
                voice.kinds[call_id] = update.kind
            title = voice.titles.get(call_id, call_id)
            status = update.status
            if status in ("completed", "failed"):
                mark, step = ("✓" if status == "completed" else "✗"), ""
            elif renamed:
                mark, status, step = "→", status or "in_progress", f"{name}: {title}"
            else:
                return
            changed = ChildToolCall(name, call_id, title, status, subagent=voice.session)
            self.progress(Progress(f"{name}: {mark} {title}", changed, step=step))
        else:
            steps = tuple(ChildPlanStep(e.content, e.status) for e in update.entries)
            lines = "; ".join(s.content for s in steps)
            plan = ChildPlan(name, steps, voice.session)
            self.progress(Progress(f"{name} plans: {lines}", plan))


def _tail(text: str, chars: int) -> str:
    """The end of `text`, at most `chars` long, from a word's start (no credential's end
    shown without its beginning)."""
    if len(text) <= chars:
        return text
    tail = text[-chars:]
    space = next((i for i, ch in enumerate(tail) if ch.isspace()), len(tail))
    return tail[space:]
