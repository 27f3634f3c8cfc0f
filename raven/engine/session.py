"""A live session: one stored session plus what a turn needs in memory.

Holds the window of the transcript the model sees (from the newest compaction's kept
part on: older messages stay in the store and are read from it when asked for), the
ordered event log, the model and mode in force, remembered "always" decisions and
steering text. Writes go to the store as they happen.
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

from raven.config import CompactionConfig, Limits, ModelSpec, ModeSpec, SandboxLevel
from raven.engine.asker import Answer
from raven.engine.compaction import Compactor, message_chars
from raven.engine.errors import SessionBusy, SessionClosed, TurnStuck
from raven.engine.events import SessionEnded, TitleChanged, TurnEnded
from raven.engine.history import interrupted_results
from raven.engine.log import EventLog, Listener, LogEvent, Snapshot
from raven.engine.project import NONE as NO_PROJECT_INSTRUCTIONS
from raven.engine.project import ProjectInstructions, read_project_instructions
from raven.engine.turn_state import Phase, TurnState
from raven.messages import CompactionMessage, Message
from raven.providers import Provider
from raven.sandbox import Sandbox, SandboxUnavailable, enforcement, strictest
from raven.sessions import SessionRecord, Sessions, TurnElsewhere
from raven.tools import Parts, Tool, ToolSource
from raven.usage import Totals, count, totals

if TYPE_CHECKING:
    from raven.engine.shared_log import SharedLog
    from raven.engine.stand_in import StandIn

Remembered = dict[str, bool]
CLAIM_RETRY_S = 0.25
"""How often a turn waiting for another process's turn to end tries to claim the session."""


@dataclass
class LiveSession:
    record: SessionRecord
    store: Sessions
    window: list[Message]
    """The transcript from `window_start` on: what the model sees, with the summary of
    the newest compaction among them (`raven.engine.compaction`)."""
    model: ModelSpec
    provider: Provider
    mode: ModeSpec | None
    limits: Limits
    tools: list[Tool]
    tool_sources: list[ToolSource] = field(default_factory=list)
    """Tool sources shared by every session of the runtime (configured MCP servers)."""
    own_tools: tuple[ToolSource, ...] = ()
    """This session's own tool sources (MCP servers an editor attached to it)."""
    jail: Sandbox = field(default_factory=Sandbox)
    """The sandbox of the session's commands, as the config has it (its mode may require
    another: `sandbox`)."""
    required: SandboxLevel | None = None
    """The sandbox a client requires of the session's commands, in this process."""
    stand_in: StandIn | None = None
    """Another agent answering this session's turns in Raven's place (a served sub-agent):
    set by the face that serves it, for the turns this process runs."""
    remembered: Remembered = field(default_factory=dict)
    """Tool name → True for "allow always", False for "reject always"."""
    deferred: bool = False
    """Not stored yet: the first commit stores the session with its first message."""
    claim_until: float | None = None
    """Stored claimed for its first turn (a shared store), which takes that claim as its
    own until this time of the event loop's clock."""
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
    window_start: int = 0
    """The index in the transcript of the window's first message."""
    compactor: Compactor = field(default_factory=lambda: Compactor(CompactionConfig()))
    """When the session compacts, and the model that writes its summaries."""
    learned_window: int | None = None
    """The context window the model's server named when it refused a request for passing
    it (`ContextTooLong`), in this process: it stands for the configured one from then on."""
    _answers: dict[str, asyncio.Future[Answer]] = field(default_factory=dict)
    _source_tools: list[Tool] = field(default_factory=list)
    _turn: TurnState | None = None
    """The turn running here, from its reservation until it has ended."""
    shared: SharedLog | None = None
    """The store's log of the session, when replicas share the store: what `log` copies."""
    log: EventLog = field(init=False)
    """Every event of the session, numbered: what faces follow from a cursor."""

    _spent: Totals | None = None
    """What the session's messages record having used, once read (`spent`)."""

    def __post_init__(self) -> None:
        self.log = EventLog(self.id, self.version)
        self._cwd = Path(self.record.cwd)  # a session never moves; read on every tool call
        self._windowed(self.window_start, self.window)

    def _windowed(self, start: int, messages: list[Message]) -> None:
        self.window, self.window_start = messages, start
        self.sizes = [message_chars(m) for m in messages]
        """What each message of the window adds to a request, in characters."""
        summaries = [m.summary for m in messages if isinstance(m, CompactionMessage)]
        self.summary: str | None = summaries[-1] if summaries else None
        """The newest compaction's summary, which the model sees before the window."""

    def model_messages(self) -> list[Message]:
        """The messages of the window a model call sends (the summary goes apart)."""
        return [m for m in self.window if not isinstance(m, CompactionMessage)]

    def since(self, version: int) -> list[Message]:
        """The messages committed after the first `version` (those the window holds)."""
        return self.window[max(0, version - self.window_start) :]

    @property
    def context_window(self) -> int | None:
        """The model's context window in tokens: as its server named it, else as configured."""
        return self.learned_window or self.provider.context_window

    @property
    def window_chars(self) -> int:
        """What the window adds to a request, in characters, the summary included."""
        return sum(self.sizes) + len(self.summary or "")

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def cwd(self) -> Path:
        return self._cwd

    @property
    def is_busy(self) -> bool:
        """True while a turn runs here."""
        return self._turn is not None

    @property
    def phase(self) -> Phase | None:
        """Where the turn running here is (`raven.engine.turn_state`); None when none is."""
        return self._turn.phase if self._turn is not None else None

    @property
    def running(self) -> bool:
        """True while a turn runs: here, or (shared) on another replica."""
        return self.is_busy or (self.shared is not None and self.log.turn_open)

    @property
    def claimed(self) -> bool:
        """This process holds the session's claim for its turn."""
        return self._turn is not None and self._turn.holds_claim

    def use_model(self, model: ModelSpec, provider: Provider, instructions: str | None) -> None:
        """The model (its provider, and the system prompt that goes with it) of the next
        model call; the record says it too."""
        self.model, self.provider, self.instructions = model, provider, instructions
        self.record = dataclasses.replace(self.record, model=model.id)

    def use_mode(self, mode: ModeSpec | None, instructions: str | None) -> None:
        """The mode (and the system prompt that goes with it) of the next decision and
        model call; the record says it too."""
        self.mode, self.instructions = mode, instructions
        self.record = dataclasses.replace(self.record, mode=mode.id if mode else None)

    @property
    def sandbox(self) -> Sandbox:
        """The sandbox the session's commands run in now: the stricter of what its mode
        and a client require, else the config's."""
        return self.jail.under(strictest(self.mode.sandbox if self.mode else None, self.required))

    def require_sandbox(self, level: SandboxLevel) -> None:
        """A client requires `level` of the session's commands (`off`: nothing more than
        its mode and the config); raises `SandboxUnavailable` when the kernel cannot hold
        it, and the session is left as it was."""
        wanted = None if level == "off" else self.jail.under(level)
        if wanted is not None and not wanted.enforced:
            raise SandboxUnavailable(
                f"the {level} sandbox cannot be held here: {enforcement(level)}"
            )
        self.required = None if wanted is None else level

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
        sources = [*self.tool_sources, *self.own_tools]
        for source in sources:
            found, problems = await source.tools()
            tools += found
            notices += problems
        self._source_tools = tools
        return notices

    def steer(self, text: str) -> bool:
        """Queue text for the running turn's next model call; False when no turn runs."""
        if self._turn is None:
            return False
        self._turn.steering.append(text)
        return True

    @property
    def closed(self) -> bool:
        """True once the session was closed or deleted: no turn runs in it until it is
        opened again (`Runtime.open_session(..., reopen=True)`)."""
        return self.record.closed

    def reserve(self) -> TurnState:
        """Take the session for a turn here (`TurnState`, reserved); `free` ends it.

        Raises `SessionClosed` or `SessionBusy` (this process's turn; another process's
        shows at `claim`).
        """
        if self.closed:
            raise SessionClosed(self.id)
        if self._turn is not None:
            raise SessionBusy(self.id)
        self._turn = TurnState()
        return self._turn

    def free(self, turn: TurnState) -> None:
        """End the turn `reserve` began (idempotent; a later turn is left alone)."""
        turn.end()
        if self._turn is turn:
            self._turn = None

    async def claim(self, turn: TurnState, wait_s: float = 0.0) -> None:
        """Claim the session for this process's `turn`, first taking in the messages other
        processes wrote since; raises `SessionBusy` while another process has a turn here,
        once `wait_s` has passed (or the turn was cancelled) without it ending."""
        stored_claim, self.claim_until = self.claim_until, None
        loop = asyncio.get_running_loop()
        if self.deferred or (stored_claim is not None and loop.time() < stored_claim):
            # No one else has it: stored claimed for this turn, now or with its first message.
            turn.claimed(held=True)
            return
        deadline = loop.time() + wait_s
        while True:
            try:
                version = await self.store.claim_turn(self.id)
                break
            except TurnElsewhere as exc:
                left = deadline - asyncio.get_running_loop().time()
                if left <= 0 or turn.cancelled.is_set():
                    raise SessionBusy(self.id, exc.pid, exc.remote) from None
                await asyncio.sleep(min(CLAIM_RETRY_S, left))
        turn.claimed(held=True)
        if version != self.version:
            await self._reload()
        # Calls a killed process left unanswered get their results now that no other
        # process can be running them, so providers accept the history.
        for result in interrupted_results(self.window):
            await self.commit(result)

    async def catch_up(self) -> None:
        """Take in what other processes wrote to the session while no turn ran here (and,
        shared, its log up to the store's newest event)."""
        if self.deferred or self.is_busy:
            return
        version = await self.store.version(self.id)
        if version != self.version and not self.is_busy:
            await self._reload()
        if self.shared is not None:
            await self.shared.catch_up(self)

    async def spent(self) -> Totals:
        """What the session's messages record having used, added up (`raven.usage`): read
        from the store the first time, then kept up to date as messages are committed."""
        while self._spent is None:
            version = self.version
            found = Totals() if self.deferred else totals(await self.store.messages(self.id))
            if version == self.version:  # else a message came meanwhile: read again
                self._spent = found
        return self._spent

    async def _reload(self) -> None:
        """Read the window again: other processes wrote to the session."""
        self._spent = None
        window = await self.store.window(self.id)
        self._windowed(window.start, window.messages)
        self.version = window.start + len(window.messages)
        if self.shared is None:  # this process's log no longer continues the transcript
            self.log.rebase(self.version)

    async def unclaim(self, turn: TurnState, end: TurnEnded) -> None:
        """End this process's claim for `turn` (done even when the turn was cancelled), and
        keep what the turn failed with, if it did (or that it did not), as the session's
        `failure`; shared, the turn's last events and `end` are stored with the release."""
        claimed = turn.release()
        failure = end.error
        if (claimed or failure is not None) and not self.deferred:
            self.record = dataclasses.replace(self.record, failure=failure)
            if self.shared is not None:
                release = self.shared.end_turn(self, end)
            else:
                release = self.store.release_turn(self.id, failure)
            await asyncio.shield(release)

    async def let_claim_go(self, turn: TurnState) -> None:
        """End this process's claim for work that was no turn (a compaction asked for): what
        it published is stored first (shared), its failure stays as it was, and no turn's
        end is told."""
        if turn.release() and not self.deferred:
            if self.shared is not None:
                await asyncio.shield(self.shared.settle(self))
            await asyncio.shield(self.store.release_turn(self.id, self.record.failure))

    async def told(self, end: TurnEnded) -> None:
        """Once the session is free: the log has the turn's end, and its followers heard it
        (shared: once read back from the store)."""
        if self.shared is not None:
            await asyncio.shield(self.shared.turn_told(self))
        else:
            self.log.append(end, self.version)

    def cancel_turn(self) -> bool:
        """Ask the running turn to stop (it ends `cancelled`); False when none runs."""
        return self._turn is not None and self._turn.cancel()

    def cancel_call(self, call_id: str, part: str | None = None) -> bool:
        """Stop one running tool call of the turn (its result says it was cancelled; the
        turn goes on), or only `part` of its work, as the tool names it (a delegated
        agent's own sub-agent); False when no such call or part runs."""
        calls = self._turn.calls if self._turn is not None else {}
        task, parts = calls.get(call_id, (None, None))
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
        calls = self._running().calls
        calls[call_id] = (task, parts)
        try:
            yield
        finally:
            calls.pop(call_id, None)

    def working(self) -> None:
        """The running task does the turn's work from now on, and `cancel_turn` cancels it,
        until `work_over`; raises `CancelledError` if the turn was stopped already."""
        self._running().working(_current_task())

    def work_over(self) -> bool:
        """The turn's work is over: `cancel_turn` no longer cancels its task. True when the
        turn was stopped, and nothing but `cancel_turn` cancelled the task."""
        return self._running().work_over(_current_task())

    async def stop_turn(self, timeout_s: float) -> None:
        """Cancel the running turn, if any, and return once it has ended; raises `TurnStuck`
        if it has not within `timeout_s`."""
        turn = self._turn
        if turn is not None and turn.cancel():
            try:
                async with asyncio.timeout(timeout_s):
                    await turn.ended.wait()
            except TimeoutError:
                raise TurnStuck(self.id, timeout_s) from None

    def _running(self) -> TurnState:
        if self._turn is None:
            raise RuntimeError(f"no turn runs in session {self.id}")
        return self._turn

    def attach_tools(self, *sources: ToolSource) -> None:
        """Give the session tool sources of its own (MCP servers an editor attached, a
        face's own tools), replacing any; none removes them. Their tools load at the next
        turn."""
        self.own_tools = sources

    def end(self, record: SessionRecord) -> None:
        """The session was closed or deleted (`record` says which state it is left in):
        no more turns here, and its subscribers hear it ended (shared: once stored)."""
        self.own_tools = ()
        self.record = dataclasses.replace(record, closed=True)
        self.publish(SessionEnded())
        if self.shared is None:
            self.log.close()

    def ended(self) -> None:
        """Another replica closed or deleted the session: closed here, followers let go."""
        self.record = dataclasses.replace(self.record, closed=True)
        self.own_tools = ()
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

    async def snapshot(self, last: int | None = None, windowed: bool = False) -> Snapshot:
        """The session so far as events, and the cursor to follow it from (`last`: only the
        newest messages of the transcript older than the log; `windowed`: none older than
        the window, whose compaction stands for them). Reads from the store only what the
        window does not hold, and only what it replays."""
        while True:
            base = self.log.base
            first = 0 if last is None else max(0, base - last)
            if windowed:
                first = max(first, self.window_start)
            if first >= base:
                older: list[Message] = []
            elif first >= self.window_start or self.deferred:
                older = self.window[first - self.window_start : base - self.window_start]
            else:
                older = await self.store.messages(self.id, last=base - first, upto=base)
            if self.log.base == base:  # else the log moved on while the store answered
                return self.log.snapshot(older)

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
        return self._turn is not None and bool(self._turn.steering)

    def take_steering(self) -> list[str]:
        turn = self._running()
        taken, turn.steering = turn.steering, []
        return taken

    async def commit(self, message: Message, title: str | None = None, soon: bool = False) -> None:
        """Keep the message (and a new title) in memory and store it before returning (with
        `soon`, by the end of the event loop's step: see `Sessions.append`). A deferred
        session is stored together with its first message."""
        create = self.record if self.deferred else None
        self.deferred = False
        self.window.append(message)
        self.sizes.append(message_chars(message))
        self.version += 1
        if self._spent is not None:
            count(self._spent, message)
        if isinstance(message, CompactionMessage):  # the model sees from its kept part on
            cut = message.kept_from - self.window_start
            self._windowed(message.kept_from, self.window[cut:])
        if title is not None:
            self.record = dataclasses.replace(self.record, title=title)
        claimed = create is not None and self.claimed
        await self.store.append(self.id, message, title, create, soon, claimed)

    async def set_title(self, title: str) -> None:
        self.record = await self.store.update(self.id, title=title)
        self.publish(TitleChanged(title))


def _current_task() -> asyncio.Task[Any]:
    task = asyncio.current_task()
    if task is None:
        raise RuntimeError("a turn's work runs in a task")
    return task


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)
