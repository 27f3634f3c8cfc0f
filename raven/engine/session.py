"""A live session: one stored session plus what a turn needs in memory.

Holds the transcript cache, the ordered event log, the model and mode in force,
remembered "always" decisions and steering text. Writes go to the store as they happen.
"""

from __future__ import annotations

import asyncio
import dataclasses
import fnmatch
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raven.config import Limits, ModelSpec, ModeSpec
from raven.engine.asker import Answer
from raven.engine.errors import SessionBusy, SessionClosed, TurnStuck
from raven.engine.events import SessionEnded, TitleChanged, TurnEnded
from raven.engine.history import interrupted_results
from raven.engine.log import EventLog, Listener, LogEvent, Snapshot
from raven.engine.project import NONE as NO_PROJECT_INSTRUCTIONS
from raven.engine.project import ProjectInstructions, read_project_instructions
from raven.messages import Message
from raven.providers import Provider
from raven.sessions import SessionRecord, Sessions, TurnElsewhere
from raven.tools import Parts, Tool, ToolSource

if TYPE_CHECKING:
    from raven.engine.shared_log import SharedLog

Remembered = dict[str, bool]
CLAIM_RETRY_S = 0.25
"""How often a turn waiting for another process's turn to end tries to claim the session."""


@dataclass
class LiveSession:
    record: SessionRecord
    store: Sessions
    history: list[Message]
    model: ModelSpec
    provider: Provider
    mode: ModeSpec | None
    limits: Limits
    tools: list[Tool]
    tool_sources: list[ToolSource] = field(default_factory=list)
    """Tool sources shared by every session of the runtime (configured MCP servers)."""
    own_tools: ToolSource | None = None
    """This session's own tool source (MCP servers an editor attached to it)."""
    remembered: Remembered = field(default_factory=dict)
    """Tool name → True for "allow always", False for "reject always"."""
    deferred: bool = False
    """Not stored yet: the first commit stores the session with its first message."""
    instructions: str | None = None
    """The mode's or model's own system prompt; None means Raven's default."""
    system: str | None = None
    """A system prompt a face gave for this process (`--system`), instead of any other."""
    project: ProjectInstructions = NO_PROJECT_INSTRUCTIONS
    """The project's instructions for agents, read again as each turn starts."""
    reads_project: bool = True
    """Whether the project's instructions are read (`--no-project-instructions` says no)."""
    version: int = 0
    """Messages of the session written so far, as this process knows them."""
    _steering: list[str] = field(default_factory=list)
    _answers: dict[str, asyncio.Future[Answer]] = field(default_factory=dict)
    _busy: bool = False
    _source_tools: list[Tool] = field(default_factory=list)
    _cancel: asyncio.Event | None = None
    _work: asyncio.Task[object] | None = None
    """The task doing the running turn's work (model and tool calls): what `cancel_turn`
    cancels."""
    _stopping: bool = False
    """`cancel_turn` cancelled `_work`."""
    _calls: dict[str, tuple[asyncio.Task[Any], Parts]] = field(default_factory=dict)
    """The running turn's tool calls that run, by call id: what `cancel_call` cancels."""
    _idle: asyncio.Event = field(default_factory=asyncio.Event)
    _claimed: bool = False
    shared: SharedLog | None = None
    """The store's log of the session, when replicas share the store: what `log` copies."""
    log: EventLog = field(init=False)
    """Every event of the session, numbered: what faces follow from a cursor."""

    def __post_init__(self) -> None:
        self._idle.set()
        self.log = EventLog(self.id, len(self.history))
        self._cwd = Path(self.record.cwd)  # a session never moves; read on every tool call

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def cwd(self) -> Path:
        return self._cwd

    @property
    def is_busy(self) -> bool:
        """True while a turn runs here."""
        return self._busy

    @property
    def running(self) -> bool:
        """True while a turn runs: here, or (shared) on another replica."""
        return self._busy or (self.shared is not None and self.log.turn_open)

    @property
    def claimed(self) -> bool:
        """This process holds the session's claim for its turn."""
        return self._claimed

    def offered_tools(self) -> list[Tool]:
        """The tools the current mode allows: built-ins, then sources; first name wins."""
        allowed = self.mode.tools if self.mode else None
        out: dict[str, Tool] = {}
        for tool in [*self.tools, *self._source_tools]:
            if tool.name in out:
                continue
            if allowed and allowed.allow is not None and not _matches(tool.name, allowed.allow):
                continue
            if allowed and _matches(tool.name, allowed.deny):
                continue
            out[tool.name] = tool
        return list(out.values())

    async def load_tools(self) -> list[str]:
        """Ask each tool source for its tools, connecting if needed; returns new notices."""
        tools: list[Tool] = []
        notices: list[str] = []
        sources = [*self.tool_sources, *([self.own_tools] if self.own_tools else [])]
        for source in sources:
            found, problems = await source.tools()
            tools += found
            notices += problems
        self._source_tools = tools
        return notices

    def steer(self, text: str) -> bool:
        """Queue text for the running turn's next model call; False when no turn runs."""
        if not self._busy:
            return False
        self._steering.append(text)
        return True

    @property
    def closed(self) -> bool:
        """True once the session was closed or deleted: no turn runs in it until it is
        opened again (`Runtime.open_session(..., reopen=True)`)."""
        return self.record.closed

    def reserve(self) -> asyncio.Event:
        """Mark a turn as running; returns its cancel event. `free()` ends it.

        Raises `SessionClosed` or `SessionBusy` (this process's turn; another process's
        shows at `claim`).
        """
        if self.closed:
            raise SessionClosed(self.id)
        if self._busy:
            raise SessionBusy(self.id)
        self._busy = True
        self._cancel = asyncio.Event()
        self._idle.clear()
        return self._cancel

    def free(self) -> None:
        """End what `reserve` began (idempotent)."""
        self._busy = False
        self._cancel = None
        self._work = None
        self._stopping = False
        self._steering.clear()
        self._idle.set()

    async def claim(self, wait_s: float = 0.0, *stops: asyncio.Event | None) -> None:
        """Claim the session for this process's turn, first taking in the messages other
        processes wrote since; raises `SessionBusy` while another process has a turn here,
        once `wait_s` has passed (or one of `stops` is set) without it ending."""
        if self.deferred:
            return
        deadline = asyncio.get_running_loop().time() + wait_s
        while True:
            try:
                version = await self.store.claim_turn(self.id)
                break
            except TurnElsewhere as exc:
                left = deadline - asyncio.get_running_loop().time()
                if left <= 0 or any(stop is not None and stop.is_set() for stop in stops):
                    raise SessionBusy(self.id, exc.pid, exc.remote) from None
                await asyncio.sleep(min(CLAIM_RETRY_S, left))
        self._claimed = True
        if version != self.version:
            await self._reload(version)
        # Calls a killed process left unanswered get their results now that no other
        # process can be running them, so providers accept the history.
        for result in interrupted_results(self.history):
            await self.commit(result)

    async def catch_up(self) -> None:
        """Take in what other processes wrote to the session while no turn ran here (and,
        shared, its log up to the store's newest event)."""
        if self.deferred or self._busy:
            return
        version = await self.store.version(self.id)
        if version != self.version and not self._busy:
            await self._reload(version)
        if self.shared is not None:
            await self.shared.catch_up(self)

    async def _reload(self, version: int) -> None:
        self.history = await self.store.messages(self.id)
        self.version = version
        if self.shared is None:  # this process's log no longer continues the transcript
            self.log.rebase(len(self.history))

    async def unclaim(self, end: TurnEnded) -> None:
        """End this process's claim (done even when the turn was cancelled), and keep what
        the turn failed with, if it did (or that it did not), as the session's `failure`;
        shared, the turn's last events and `end` are stored with the release."""
        claimed, self._claimed = self._claimed, False
        failure = end.error
        if claimed or (failure is not None and not self.deferred):
            self.record = dataclasses.replace(self.record, failure=failure)
            if self.shared is not None:
                release = self.shared.end_turn(self, end)
            else:
                release = self.store.release_turn(self.id, failure)
            await asyncio.shield(release)

    async def told(self, end: TurnEnded) -> None:
        """Once the session is free: the log has the turn's end, and its followers heard it
        (shared: once read back from the store)."""
        if self.shared is not None:
            await asyncio.shield(self.shared.turn_told(self))
        else:
            self.log.append(end, self.version)

    def cancel_turn(self) -> bool:
        """Ask the running turn to stop (it ends `cancelled`); False when none runs."""
        if self._cancel is None:
            return False
        self._cancel.set()
        if self._work is not None and not self._stopping:
            self._stopping = True
            self._work.cancel()
        return True

    def cancel_call(self, call_id: str, part: str | None = None) -> bool:
        """Stop one running tool call of the turn (its result says it was cancelled; the
        turn goes on), or only `part` of its work, as the tool names it (a delegated
        agent's own sub-agent); False when no such call or part runs."""
        task, parts = self._calls.get(call_id, (None, None))
        if task is None or parts is None or task.done():
            return False
        if part is not None:
            return parts.cancel is not None and parts.cancel(part)
        task.cancel()
        return True

    @contextmanager
    def calling(self, call_id: str, task: asyncio.Task[Any], parts: Parts) -> Iterator[None]:
        """`task` runs tool call `call_id` of the turn, whose `parts` may be cancelled
        alone, for `cancel_call`, while the block runs."""
        self._calls[call_id] = (task, parts)
        try:
            yield
        finally:
            self._calls.pop(call_id, None)

    def working(self) -> None:
        """The running task does the turn's work from now on, and `cancel_turn` cancels it,
        until `work_over`; raises `CancelledError` if the turn was stopped already."""
        if self._cancel is not None and self._cancel.is_set():
            raise asyncio.CancelledError
        self._work = asyncio.current_task()

    def work_over(self) -> bool:
        """The turn's work is over: `cancel_turn` no longer cancels its task. True when the
        turn was stopped, and nothing but `cancel_turn` cancelled the task."""
        task = asyncio.current_task()
        assert task is not None
        if self._stopping:
            task.uncancel()
        self._work, self._stopping = None, False
        stopped = self._cancel is not None and self._cancel.is_set()
        return stopped and not task.cancelling()

    async def stop_turn(self, timeout_s: float) -> None:
        """Cancel the running turn, if any, and return once it has ended; raises `TurnStuck`
        if it has not within `timeout_s`."""
        if self.cancel_turn():
            try:
                async with asyncio.timeout(timeout_s):
                    await self._idle.wait()
            except TimeoutError:
                raise TurnStuck(self.id, timeout_s) from None

    def attach_tools(self, source: ToolSource | None) -> None:
        """Give the session a tool source of its own (MCP servers an editor attached, a
        face's own tools), replacing any; None removes it. Its tools load at the next turn."""
        self.own_tools = source

    def end(self, record: SessionRecord) -> None:
        """The session was closed or deleted (`record` says which state it is left in):
        no more turns here, and its subscribers hear it ended (shared: once stored)."""
        self.own_tools = None
        self.record = dataclasses.replace(record, closed=True)
        self.publish(SessionEnded())
        if self.shared is None:
            self.log.close()

    def ended(self) -> None:
        """Another replica closed or deleted the session: closed here, followers let go."""
        self.record = dataclasses.replace(self.record, closed=True)
        self.own_tools = None
        self.log.close()

    def read_project(self) -> None:
        """Read the project's instructions again (as each turn starts, so an edited
        `AGENTS.md` holds from the next turn); forgotten when the session reads none.
        Inline: a few stats and at most `MAX_BYTES` of small local files."""
        self.project = NO_PROJECT_INSTRUCTIONS
        if self.reads_project:
            self.project = read_project_instructions(self.cwd)

    def publish(self, event: LogEvent) -> None:
        """Append the event to the session's log, which gives it to every follower."""
        if self.shared is not None:
            self.shared.publish(self, event)
        else:
            self.log.append(event, self.version)

    def follow(self, listener: Listener, after: str | None = None) -> Callable[[], None]:
        """Every event after the cursor `after` (None: from now on), replayed, then live;
        returns the function that stops it. Raises `CursorExpired`."""
        return self.log.follow(listener, after)

    async def reach(self, cursor: str | None) -> None:
        """Read a shared log up to `cursor` when this copy is behind it (a UI coming back
        from a replica further along), so that following from it resumes instead of
        expiring; nothing otherwise."""
        if cursor is not None and self.shared is not None and self.log.behind(cursor):
            await self.shared.catch_up(self)

    def snapshot(self, last: int | None = None) -> Snapshot:
        """The session so far as events, and the cursor to follow it from (`last`: only the
        newest messages of the transcript older than the log)."""
        return self.log.snapshot(self.history, last)

    def awaiting(self, request_id: str) -> asyncio.Future[Answer]:
        """What `answer` gives for the turn's asking `request_id`, until `settled`."""
        future = self._answers[request_id] = asyncio.get_running_loop().create_future()
        return future

    def answer(self, request_id: str, value: Answer) -> bool:
        """Answer the running turn's asking `request_id` (a decision, or a question's text)
        from outside the face that asked; False when it is not waiting for one."""
        future = self._answers.get(request_id)
        if future is None or future.done():
            return False
        future.set_result(value)
        return True

    def settled(self, request_id: str) -> None:
        self._answers.pop(request_id, None)

    def has_steering(self) -> bool:
        return bool(self._steering)

    def take_steering(self) -> list[str]:
        taken, self._steering = self._steering, []
        return taken

    async def commit(self, message: Message, title: str | None = None, soon: bool = False) -> None:
        """Keep the message (and a new title) in memory and store it before returning (with
        `soon`, by the end of the event loop's step: see `Sessions.append`). A deferred
        session is stored together with its first message."""
        create = self.record if self.deferred else None
        self.deferred = False
        self.history.append(message)
        self.version += 1
        if title is not None:
            self.record = dataclasses.replace(self.record, title=title)
        await self.store.append(self.id, message, title, create, soon)

    async def set_title(self, title: str) -> None:
        self.record = await self.store.update(self.id, title=title)
        self.publish(TitleChanged(title))


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)
