"""A task's turn: one A2A task's work as one Raven turn on the engine.

`TaskTurn` runs the turn and turns what happens in it into what a peer is told, in
order: that it started (the session is this process's: the task works from then on,
not while it waits for another turn of its conversation), answer text in chunks at most
every `STREAM_INTERVAL_S`, lines of progress (a tool call's title and state, the plan;
never arguments or output), a question (the task waits for input) and the end. The
peer's answer to a question goes where every face's does, the engine's own registry of
askings (`LiveSession.answer`), as a decision or a text; whoever answers first wins.
It also owns the conversation's session (one per caller and context id), the peer's
message as a prompt and the files the turn attaches. It never writes a task: the task
service does, from what `next()` returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from a2a.types import Message, Part

from raven.a2a.attach import attach_source
from raven.a2a.parts import prompt_text
from raven.a2a_parts import safe_name
from raven.config.schema import ApprovalPolicy
from raven.engine import (
    AgentText,
    Answer,
    ApprovalRequest,
    Asker,
    CompactionUpdated,
    Decision,
    LiveSession,
    LogEvent,
    PlanUpdated,
    Question,
    Runtime,
    StandIn,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEnded,
    TurnEvent,
    TurnStarted,
    Unanswered,
    UsageUpdated,
    preview_lines,
    start_turn,
    until_answered,
)
from raven.messages import TextPart
from raven.redact import redact

log = logging.getLogger(__name__)

INBOX = "inbox"
"""Under the working directory: one folder per conversation for the files peers send."""
STREAM_INTERVAL_S = 0.25
"""Answer text reaches peers as artifact chunks at most this often."""
LOCAL_WINDOW_S = 60.0
"""How long people right here get to answer before the task asks the peer."""
_YES = {"y", "yes", "allow", "ok", "approve", "approved"}
_ALWAYS = {"a", "always", "allow always"}

LocalAsker = Callable[[str], Asker | None]
"""For a session id, an asker that reaches people right here (the gateway's UIs), if any."""


@dataclass
class Started:
    """The turn holds its session's claim and works: what the log says from here is its."""


@dataclass
class Asked:
    """The turn asks the peer: the task waits for input until the engine has the answer
    to its asking `request_id` (`TaskTurn.answer` here, `Runtime.answer` from anywhere)."""

    text: str
    request_id: str
    approval: bool
    """An approval (answered yes, always or no, `reply_value`) rather than a question."""


@dataclass
class Chunk:
    """Answer text generated since the last chunk."""

    text: str


@dataclass
class Progress:
    """A line of progress: a tool call started or ended, the plan changed."""

    text: str


@dataclass
class Ended:
    """The turn is over: its whole answer, the files it attached, why it stopped, and
    the tokens it used as far as they were reported."""

    stop: str
    text: str
    error: str | None
    attachments: list[Part]
    usage: dict[str, Any] | None = None
    """`inputTokens` and `outputTokens` over the turn's model calls (or its stand-in's)."""


Step = Started | Asked | Chunk | Progress | Ended


class MintedContexts:
    """Context ids this server minted for messages that came without one.

    A minted context cannot have a session yet, so its first turn skips the lookup.
    """

    MAX_REMEMBERED = 4096

    def __init__(self) -> None:
        self._fresh: dict[str, None] = {}

    def generate(self) -> str:
        if len(self._fresh) >= self.MAX_REMEMBERED:
            self._fresh.pop(next(iter(self._fresh)))
        context_id = str(uuid.uuid4())
        self._fresh[context_id] = None
        return context_id

    def take(self, context_id: str) -> bool:
        """True once for a context id this generator minted."""
        return self._fresh.pop(context_id, False) is None


class Conversations:
    """The session of each (caller, context id), in the A2A working directory."""

    def __init__(
        self,
        runtime: Runtime,
        workdir: Path,
        attach: Callable[[str, Part], bool],
        max_file_bytes: int,
        stand_in: StandIn | None = None,
    ) -> None:
        self.runtime = runtime
        self.workdir = workdir
        self._stand_in = stand_in
        self.minted = MintedContexts()
        self._made = False
        self._attach_tool = attach_source(attach, max_file_bytes)

    @staticmethod
    def session_id(owner: str, context_id: str) -> str:
        digest = hashlib.sha256(f"{owner}\0{context_id}".encode()).hexdigest()[:32]
        return f"a2a_{digest}"

    async def open(self, owner: str, context_id: str, first: bool) -> LiveSession:
        """The conversation's live session; `first` for a task that starts a context."""
        if not self._made:
            self.workdir.mkdir(parents=True, exist_ok=True)
            self._made = True
        session_id = self.session_id(owner, context_id)
        answering = self._stand_in
        if first and self.minted.take(context_id):
            live = await self.runtime.new_session(
                self.workdir,
                session_id=session_id,
                deferred=True,
                answered_by=answering,
                turn_follows=True,
            )
        else:
            live = await self.runtime.open_session(
                session_id, create_in=self.workdir, reopen=True, answered_by=answering
            )
        if answering is None:  # an agent answering in Raven's place is offered no tools
            live.attach_tools(self._attach_tool)
        return live

    def inbox(self, context_id: str) -> Path:
        return self.workdir / INBOX / safe_name(context_id, set())

    async def prompt(self, message: Message, context_id: str, data: list[Any] | None) -> str:
        """The peer's message as a prompt; its inline files land in the context's inbox."""
        if any(p.WhichOneof("content") == "raw" for p in message.parts):
            inbox = self.inbox(context_id)
            return await asyncio.to_thread(prompt_text, message, inbox, data)
        return prompt_text(message, None, data)


class TaskTurn:
    """One task's turn, from its start to `Ended`."""

    def __init__(self, session: LiveSession, local: Asker | None) -> None:
        self.session = session
        self._local = local
        self._steps: asyncio.Queue[Step] = asyncio.Queue()
        self._cancelled = False
        self._asking: _Pending | None = None
        """The question the peer was asked and has not answered; its answer goes to the
        engine's own registry of askings (`LiveSession.answer`), as any face's does."""
        self._peer_answered = False
        self._buffer: list[str] = []
        self._flush: asyncio.TimerHandle | None = None
        self._text: list[str] = []
        self._titles: dict[str, str] = {}
        self._used: list[int] | None = None
        """Input and output tokens the turn's model calls reported, once one did."""
        self._ended = False
        self.attachments: list[Part] = []
        self._work: asyncio.Task[Any] | None = None
        self.answered_elsewhere = False
        """The last question the peer was asked was answered by someone else (a person
        at a UI), so the task works again without the peer's answer."""
        self._stop_following: Callable[[], None] = _following_nothing
        self._prompt: TextPart | None = None
        self.started = False
        """The turn holds its session's claim (its own `TurnStarted` is in the log): until
        then, what the log says is another turn's (one of another replica, say)."""

    def start(self, prompt: str, approvals: ApprovalPolicy, wait_s: float) -> None:
        """Start the turn; raises the engine's `SessionBusy` or `SessionClosed`. A turn of
        the conversation running on another replica is waited for, up to `wait_s`.

        What the turn says is read from the session's ordered log, as every face reads it
        (the engine appends each event once, in order); its end, as the engine tells it."""
        stop_following = self.session.follow(lambda logged: self._emit(logged.event))
        self._prompt = TextPart(text=prompt)
        try:
            work = start_turn(
                self.session,
                [self._prompt],
                _TaskAsker(self, self._local),
                self._told,
                approvals=approvals,  # the engine applies it, after the mode's
                wait_s=wait_s,
            )
        except BaseException:
            stop_following()
            raise
        self._stop_following = stop_following
        work.add_done_callback(self._finish)
        self._work = work

    @property
    def asking(self) -> bool:
        return self._asking is not None and not self._asking.settled.is_set()

    async def next(self) -> Step:
        return await self._steps.get()

    async def wait_answer(self, timeout_s: float) -> bool:
        """Wait for the question asked to be answered (or the turn stopped); False when
        `timeout_s` passed first."""
        pending = self._asking
        if pending is None or pending.settled.is_set():
            return True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await pending.settled.wait()
                return True
        return False

    def answer(self, text: str | None) -> bool:
        """Answer the turn's question with the peer's text (None: nobody answered), as the
        engine takes an answer from any face; False when it asks none."""
        pending = self._asking
        if pending is None or pending.settled.is_set():
            return False
        value = reply_value(text, pending.approval)
        self._peer_answered = self.session.answer(pending.request_id, value)
        return self._peer_answered

    def steer(self, text: str) -> bool:
        """Hand the running turn a follow-up for its next step; False when it cannot."""
        return self._work is not None and not self._work.done() and self.session.steer(text)

    def cancel(self) -> None:
        """Stop the turn (a question it asks included); `Ended` follows."""
        self._cancelled = True
        if self._work is not None and not self._work.done():  # the session's turn is this
            self.session.cancel_turn()

    async def wait(self, timeout_s: float) -> bool:
        """Wait for the turn to stop; False when it did not within `timeout_s`."""
        if self._work is None:
            return True
        _, pending = await asyncio.wait([self._work], timeout=timeout_s)
        return not pending

    def _emit(self, event: LogEvent) -> None:
        if isinstance(event, TurnStarted):
            self._begin(event)
        elif not self.started:
            return  # the log is the session's: until this turn's start, another's events
        elif isinstance(event, AgentText):  # pieces the engine cut whole: each masked alone
            piece = redact(event.text)
            self._text.append(piece)
            self._buffer.append(piece)
            if self._flush is None:
                self._flush = asyncio.get_running_loop().call_later(STREAM_INTERVAL_S, self._chunk)
        elif isinstance(event, UsageUpdated):
            if event.input_tokens is not None and event.output_tokens is not None:
                used = self._used = self._used or [0, 0]
                used[0] += event.input_tokens
                used[1] += event.output_tokens
        elif (line := _progress_line(event, self._titles)) is not None:
            self._steps.put_nowait(Progress(redact(line)))

    def _begin(self, event: TurnStarted) -> None:
        """A turn started in the session: this one, if it is on this turn's prompt. Events
        come in the log's order, so another replica's turn on the same words, told late,
        comes before this one's start, which begins the answer again."""
        first = event.parts[0] if event.parts else None
        if self._prompt is None or getattr(first, "text", None) != self._prompt.text:
            return
        self._text.clear()
        self._buffer.clear()
        self._titles.clear()
        self._used = None
        if not self.started:
            self.started = True
            self._steps.put_nowait(Started())

    def _chunk(self) -> None:
        self._flush = None
        if self._buffer:
            self._steps.put_nowait(Chunk("".join(self._buffer)))
            self._buffer.clear()

    def _stop_chunks(self) -> None:
        """Drop what is buffered: `Ended` carries the whole answer."""
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None

    def _told(self, event: TurnEvent) -> None:
        """What the engine tells this turn's face directly: only its end is taken from here
        (the rest comes through the log, which another turn's end may reach too)."""
        if isinstance(event, TurnEnded):
            self._end(event.stop_reason, event.error)

    def _end(self, stop: str, error: str | None) -> None:
        # Let go of the log's listener, which refers to this turn: the turn, its session
        # and their log are then freed as soon as the task lets go of them, not when the
        # garbage collector comes across the cycle.
        self._stop_following()
        self._stop_following = _following_nothing
        self._stop_chunks()
        self._ended = True
        used = self._used
        usage = None if used is None else {"inputTokens": used[0], "outputTokens": used[1]}
        self._steps.put_nowait(Ended(stop, "".join(self._text), error, self.attachments, usage))

    def _finish(self, work: asyncio.Task[Any]) -> None:
        """The turn's task is done: if it ended without telling (it could not start, or
        failed), `Ended` says so."""
        if self._ended:
            return
        if work.cancelled():
            self._end("cancelled", None)
            return
        if (exc := work.exception()) is not None:
            log.error("A2A turn in session %s failed", self.session.id, exc_info=exc)
        self._end("end_turn", "internal error")

    async def _ask(self, text: str, request_id: str, approval: bool) -> NoReturn:
        """Ask the peer: the task waits for input until the engine has the answer (the
        peer's, through `answer`, or anyone's), and stops this wait."""
        pending = self._asking = _Pending(request_id, approval)
        self._steps.put_nowait(Asked(redact(text), request_id, approval))
        try:
            await until_answered()
        except asyncio.CancelledError:  # answered (by the peer, or a person), or stopped
            self.answered_elsewhere = not self._cancelled and not self._peer_answered
            raise
        finally:
            pending.settled.set()
            self._asking = None
            self._peer_answered = False


@dataclass
class _Pending:
    request_id: str
    approval: bool
    """An approval (answered yes, always or no) rather than a question."""
    settled: asyncio.Event = field(default_factory=asyncio.Event)


class _TaskAsker:
    """Asks the people at hand first (on the gateway, its UIs), then the peer."""

    def __init__(self, turn: TaskTurn, local: Asker | None) -> None:
        self._turn = turn
        self._local = local

    async def approve(self, request: ApprovalRequest) -> Decision | Unanswered:
        if self._local is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(LOCAL_WINDOW_S):
                    return await self._local.approve(request)
        shown = "\n".join(preview_lines(request.preview)) if request.preview else ""
        asked = f"Allow {request.title}?" + (f"\n{shown}\n" if shown else " ")
        await self._turn._ask(asked + "Answer yes, always, or no.", request.request_id, True)

    async def ask(self, question: Question) -> str | None:
        if self._local is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(LOCAL_WINDOW_S):
                    return await self._local.ask(question)
        text = question.text
        if question.choices:
            text += "\nChoices: " + "; ".join(question.choices)
        await self._turn._ask(text, question.request_id, False)


def reply_value(text: str | None, approval: bool) -> Answer:
    """A peer's reply to an asking, as the engine takes it: a question's text, or an
    approval's decision (None: nobody answered)."""
    if not approval:
        return text
    if text is None:
        return "unanswered"
    word = text.strip().lower().rstrip(".!")
    if word in _ALWAYS:
        return "allow_always"
    return "allow_once" if word in _YES else "reject_once"


def _following_nothing() -> None:
    """What stops following the log before the turn starts: nothing."""


def _progress_line(event: LogEvent, titles: dict[str, str]) -> str | None:
    """What a peer is told of a turn event while the task works: titles and states only,
    never a tool's arguments or output."""
    if isinstance(event, ToolCallStarted):
        titles[event.call_id] = event.title
        return f"→ {event.title}"
    if isinstance(event, ToolCallUpdated) and event.status != "in_progress":
        mark = "✓" if event.status == "completed" else "✗"
        return f"{mark} {titles.get(event.call_id, event.call_id)}"
    if isinstance(event, PlanUpdated):
        marks = {"completed": "[x]", "in_progress": "[~]", "pending": "[ ]"}
        return "Plan:\n" + "\n".join(f"{marks[s.status]} {s.content}" for s in event.steps)
    if isinstance(event, CompactionUpdated) and event.status == "completed":
        return "Compacted: the model now sees a summary of the earlier conversation."
    if isinstance(event, CompactionUpdated) and event.status == "failed":
        return f"Compaction failed: {event.error}"
    return None
