"""A session's ordered event log: every turn and session event of a live session, numbered.

Each event a turn emits and each session event (a turn began or ended, a title, mode or
model change, the end of the session) is appended once with the next sequence number,
whichever face runs the turn. A face reads it from a cursor: `follow` replays what came
after the cursor, then delivers live, in one synchronous step, so there is no gap and no
duplicate; `snapshot` is the whole session as events (the older transcript as replayed
events, then the logged events) with the cursor it ends at.

The log is kept in memory beside the transcript cache, bounded by whole turns: once it
holds more than `MAX_EVENTS`, the oldest turns leave it (the transcript still has them) and
a cursor into them expires. A turn that alone holds more (a long streamed answer, a word
an event) has the runs of text in its older half joined into one event each: what it
said stays (a long run compressed until it is read), and a cursor into the joined
part expires. A cursor names one log (its
epoch), so a cursor from another process, or from before the transcript changed under
the log, expires instead of replaying the wrong events. With a store that replicas
share, the log is the store's: the epoch is the session's own and the store numbers the
events, which reach this copy through `ingest`, so a cursor holds on every replica.
Knows no protocol; never touches the store.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import secrets
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from raven.engine.errors import CursorExpired
from raven.engine.events import (
    AgentText,
    AgentThought,
    SessionEvent,
    TurnEnded,
    TurnEvent,
    TurnStarted,
)
from raven.engine.history import HistoryEvent, history_events
from raven.messages import Message

log = logging.getLogger(__name__)

MAX_EVENTS = 10_000
"""Events the log keeps before its oldest turns leave it; the running turn always stays."""
PACKED_CHARS = 4096
"""A joined run of text this long or longer is kept compressed (`_Packed`): a long answer
is then held about once in memory while it streams (its text), not twice."""

LogEvent = TurnEvent | SessionEvent


@dataclass(frozen=True)
class Logged:
    """One event as the log numbered it; `cursor` resumes right after it."""

    seq: int
    cursor: str
    event: LogEvent


Listener = Callable[[Logged], None]


@dataclass(frozen=True)
class _Packed:
    """A joined run of text (or thought) as the log keeps it: compressed, opened when it
    is read."""

    seq: int
    cursor: str
    thought: bool
    data: bytes

    def opened(self) -> Logged:
        text = zlib.decompress(self.data).decode()
        event = AgentThought(text) if self.thought else AgentText(text)
        return Logged(self.seq, self.cursor, event)


def _opened(entries: Sequence[Logged | _Packed]) -> list[Logged]:
    return [e if isinstance(e, Logged) else e.opened() for e in entries]


@dataclass(frozen=True)
class Snapshot:
    """The session as events up to `cursor`: `history` replays the older transcript (those
    events carry no cursor), `logged` the events the log still holds."""

    history: list[HistoryEvent]
    logged: list[Logged]
    cursor: str

    def events(self) -> list[HistoryEvent | LogEvent]:
        return [*self.history, *(entry.event for entry in self.logged)]


class EventLog:
    """The log of one live session. `base` is how many transcript messages precede it."""

    def __init__(self, session_id: str, base: int) -> None:
        self._session_id = session_id
        self._listeners: list[Listener] = []
        self._start(base)

    def _start(self, base: int, epoch: str | None = None, seq: int = 0) -> None:
        self._epoch = epoch or secrets.token_hex(4)
        self._seq = seq
        self._entries: list[Logged | _Packed] = []
        self._turns: list[tuple[int, int]] = []
        """(index in `_entries`, transcript length before it) of each logged turn start."""
        self._base = base
        self._joined = 0
        """The newest event whose text was joined with others: a cursor before it expires."""
        self._settled = 0
        """How many entries at the front went through `_join` (never joined again)."""
        self.turn_open = False
        """A turn started and has not ended yet (in this process or, shared, any)."""

    @property
    def cursor(self) -> str:
        """The cursor after the newest event."""
        return self._cursor(self._seq)

    @property
    def epoch(self) -> str:
        return self._epoch

    @property
    def seq(self) -> int:
        """The number of the newest event."""
        return self._seq

    def _cursor(self, seq: int) -> str:
        return f"{self._epoch}.{seq}"

    def append(self, event: LogEvent, version: int) -> Logged:
        """Number `event`, keep it and give it to every listener (one that fails is dropped).

        `version` is the transcript length as the event happens; a turn start records it.
        """
        self.ingest(self._seq + 1, event, version)
        entry = self._entries[-1]  # the newest entries are never joined
        assert isinstance(entry, Logged)
        return entry

    def ingest(self, seq: int, event: LogEvent | None, version: int) -> None:
        """Keep the event the shared store numbered `seq` (after every one before it) and
        give it to every listener; None stands for an event this Raven does not know, whose
        number is skipped."""
        self._seq = seq
        if event is None:
            return
        entry = Logged(seq, self._cursor(seq), event)
        if isinstance(event, TurnStarted):
            self._turns.append((len(self._entries), version))
            self.turn_open = True
        elif isinstance(event, TurnEnded):
            self.turn_open = False
        self._entries.append(entry)
        self._trim()
        for listener in list(self._listeners):
            try:
                listener(entry)
            except Exception:
                log.exception("a listener of session %s failed; dropped", self._session_id)
                self._drop(listener)

    def _trim(self) -> None:
        """Let the oldest whole turns go while the log holds too much; never the newest,
        whose older half has its text joined up instead."""
        while len(self._entries) > MAX_EVENTS and len(self._turns) > 1:
            cut, base = self._turns[1]
            self._entries = self._entries[cut:]
            self._turns = [(i - cut, v) for i, v in self._turns[1:]]
            self._base = base
            self._settled = max(0, self._settled - cut)
        if len(self._entries) - self._settled > MAX_EVENTS:
            self._join(len(self._entries) - MAX_EVENTS // 2)

    def _join(self, cut: int) -> None:
        """Each run of text (or of thought) in the entries from the settled ones to `cut`
        becomes one event, numbered as the run's last; they are settled then. Each event's
        text is copied once however long the turn."""
        start = self._settled
        joined: list[Logged | _Packed] = []
        moved: dict[int, int] = {}  # an event left alone: its index then and now
        index = start
        for _, group in itertools.groupby(self._entries[start:cut], key=_run_of):
            run = list(group)
            if len(run) == 1:
                moved[index] = start + len(joined)
            joined.append(_one_event(run) if len(run) > 1 else run[0])
            index += len(run)
        self._entries[start:cut] = joined
        self._settled = start + len(joined)
        self._joined = joined[-1].seq
        gone = cut - self._settled
        self._turns = [
            (i if i < start else moved[i] if i < cut else i - gone, version)
            for i, version in self._turns
        ]

    def settle(self) -> None:
        """Join each run of text (or thought) of the ended turns into one event: for a log
        nothing follows, which keeps what a returning follower needs in a fraction of the
        memory. A cursor inside a joined run expires; one at an event the log holds does not."""
        if not self.turn_open and self._settled < len(self._entries):
            self._join(len(self._entries))

    def rebase(self, base: int, epoch: str | None = None, seq: int = 0) -> None:
        """Start a new log after the transcript's first `base` messages: the transcript
        changed beneath it (another process wrote to the session), or this is a copy of
        the shared log `epoch` from after its event `seq`. Cursors of the old log expire."""
        self._start(base, epoch, seq)

    @property
    def base(self) -> int:
        """How many transcript messages precede the log."""
        return self._base

    @property
    def followed(self) -> bool:
        """Something follows the log (`follow`) and has not stopped."""
        return bool(self._listeners)

    @property
    def logged(self) -> list[Logged]:
        """The events the log holds, oldest first."""
        return _opened(self._entries)

    def snapshot(self, older: Sequence[Message]) -> Snapshot:
        """The session as events: `older` (transcript messages that end where the log
        begins, at `base`) replayed, then the logged events."""
        return Snapshot(list(history_events(older)), _opened(self._entries), self.cursor)

    def follow(self, listener: Listener, after: str | None = None) -> Callable[[], None]:
        """Give `listener` every event after the cursor `after` (None: from now on), replayed
        at once and then live; returns the function that stops it.

        Raises `CursorExpired` when the log no longer holds what comes after `after`.
        """
        for entry in self._since(after):
            listener(entry)
        self._listeners.append(listener)
        return lambda: self._drop(listener)

    def behind(self, cursor: str) -> bool:
        """`cursor` is of this log's epoch but past the newest event this copy holds: a
        copy of a shared log that has not read so far yet (another replica handed the
        cursor out)."""
        epoch, _, number = cursor.partition(".")
        return epoch == self._epoch and number.isdigit() and int(number) > self._seq

    def _since(self, after: str | None) -> list[Logged]:
        if after is None:
            return []
        epoch, _, number = after.partition(".")
        if epoch != self._epoch or not number.isdigit() or int(number) > self._seq:
            raise CursorExpired(self._session_id, after)
        seq = int(number)
        first = self._entries[0].seq if self._entries else self._seq + 1
        held = bisect.bisect_right(self._entries, seq, key=_seq)
        at_held = held > 0 and self._entries[held - 1].seq == seq  # not inside a joined run
        if seq < first - 1 or (seq < self._joined and not at_held):
            raise CursorExpired(self._session_id, after)
        return _opened(self._entries[held:])

    def close(self) -> None:
        """No more events: listeners are let go."""
        self._listeners.clear()

    def _drop(self, listener: Listener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)


_JOINABLE = (AgentText, AgentThought)


def _run_of(entry: Logged | _Packed) -> object:
    """What joins `entry` to its neighbours: text with text, thought with thought; any
    other event stands alone (its own identity)."""
    if isinstance(entry, Logged) and isinstance(entry.event, _JOINABLE):
        return type(entry.event)
    return id(entry)


def _one_event(run: list[Logged | _Packed]) -> Logged | _Packed:
    """A run of text (or thought) as one event, numbered as its last; packed if long."""
    text = "".join(
        e.event.text for e in run if isinstance(e, Logged) and isinstance(e.event, _JOINABLE)
    )
    last = run[-1]
    thought = isinstance(last, Logged) and isinstance(last.event, AgentThought)
    if len(text) >= PACKED_CHARS:
        return _Packed(last.seq, last.cursor, thought, zlib.compress(text.encode(), 1))
    return Logged(last.seq, last.cursor, AgentThought(text) if thought else AgentText(text))


def _seq(entry: Logged | _Packed) -> int:
    return entry.seq
