"""The session store the engine uses, whatever it is kept in, and how the config picks one.

`Sessions` is what every store does (SQLite, the default and embedded; PostgreSQL, for
replicas); both keep a face's tasks beside the sessions (`raven.sessions.tasks`). A store
that replicas share (`shared`) also keeps the sessions' event logs,
the claims as leases that their holders renew, and an inbox for each running turn:
`SharedSessions`. Knows nothing of turns, tools or faces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

from raven.messages import Message
from raven.sessions.records import (
    DEFAULT_PAGE_SIZE,
    SearchHit,
    SessionPage,
    SessionRecord,
    Window,
)
from raven.sessions.tasks import SharedTaskRows, TaskRows

if TYPE_CHECKING:
    from raven.config import Paths, SessionsConfig


class Sessions(TaskRows, Protocol):
    """Records and transcripts, and a face's tasks beside them (`TaskRows`); every write
    is committed before its call returns.

    Raises `SessionNotFound` for an unknown id; `TurnElsewhere` where a guarded change
    meets another process's turn; `StoreUnavailable` when the store cannot be reached.
    """

    shared: bool
    """Replicas on other machines share it: see `SharedSessions`."""

    async def aclose(self) -> None: ...

    async def create(
        self,
        cwd: str,
        face: str,
        mode: str | None = None,
        model: str | None = None,
        session_id: str | None = None,
    ) -> SessionRecord:
        """A new session; `session_id` lets a face derive ids (it must be unused)."""
        ...

    async def get_or_create(
        self, session_id: str, cwd: str, face: str, mode: str | None, model: str | None
    ) -> tuple[SessionRecord, Window]:
        """The session and its window (`window`), created empty first if it does not exist."""
        ...

    async def fork(
        self, session_id: str, cwd: str, face: str, upto: int | None = None
    ) -> SessionRecord:
        """A new session holding the transcript of `session_id` (its first `upto` messages,
        or all) in one transaction, with its title, mode and model (and its newest
        compaction among them), naming it as its parent; `SessionNotFound` when there
        is none."""
        ...

    async def get(self, session_id: str) -> SessionRecord: ...

    async def resolve(self, prefix: str) -> str:
        """The one session id that is `prefix` or starts with it (`ses_` may be left off);
        `SessionNotFound` for none, `AmbiguousSession` for several."""
        ...

    async def page(
        self,
        cwd: str | None = None,
        cursor: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
        query: str | None = None,
        not_face: str | None = None,
    ) -> SessionPage:
        """Newest first; `cursor` continues a previous page (`BadCursor` if not one);
        `query` is a piece of the title or the directory (any case); `not_face` leaves
        out the sessions made by that face."""
        ...

    async def append(
        self,
        session_id: str,
        message: Message,
        title: str | None = None,
        create: SessionRecord | None = None,
        soon: bool = False,
        claimed: bool = False,
    ) -> None:
        """Commit one message at the end of the transcript (and a new title); with
        `create`, the session is inserted first, in the same transaction (`claimed`: with
        this process's claim for its turn, as `claim_turn` takes it). Appends to one
        session commit in the order they were called. A `CompactionMessage` becomes the
        session's newest compaction, which `window` starts from.

        With `soon`, the commit may wait for this process's next append to the session,
        to share its transaction (SQLite) or its statement (PostgreSQL), but not past the
        end of the event loop's current step (before any task woken after the call runs,
        SQLite commits it; PostgreSQL sends it): for a message nobody is told of until
        then. The turn's end (`end_turn`) comes after it."""
        ...

    async def messages(
        self, session_id: str, last: int | None = None, upto: int | None = None
    ) -> list[Message]:
        """The transcript in order; with `upto`, only its first `upto` messages; with
        `last`, only the newest `last` of those. Reads only what it returns."""
        ...

    async def window(self, session_id: str) -> Window:
        """What the model sees of the session: the messages from its newest compaction's
        `kept_from` on (the whole transcript before any compaction). Reads only those."""
        ...

    async def version(self, session_id: str) -> int:
        """The number of messages written to the session, by any process."""
        ...

    async def claim_turn(self, session_id: str) -> int:
        """Claim the session for a turn of this process; returns its version. Raises
        `TurnElsewhere` while another live process holds it; a claim whose holder is gone
        (or, shared, whose lease lapsed) is taken over."""
        ...

    async def renew_claims(self, session_ids: list[str]) -> list[str]:
        """Keep this process's claims on these sessions from lapsing; those it still holds."""
        ...

    async def release_turn(self, session_id: str, failure: str | None = None) -> None:
        """End this process's claim, if it holds one, and keep `failure` (what the turn
        failed with, or None) as the session's; a no-op while another process holds it."""
        ...

    async def update(
        self,
        session_id: str,
        *,
        title: str | None = None,
        mode: str | None = None,
        model: str | None = None,
        closed: bool | None = None,
        guarded: bool = False,
    ) -> SessionRecord:
        """Change what is given; `guarded` refuses (`TurnElsewhere`) while another
        process holds the session."""
        ...

    async def search(self, text: str, cwd: str | None = None, limit: int = 20) -> list[SearchHit]:
        """Sessions whose transcripts hold every word of `text`, best first, each with a
        snippet where `MATCH_START` and `MATCH_END` mark the words found."""
        ...

    async def delete(self, session_id: str, guarded: bool = False) -> bool:
        """Remove the session and its transcript; False when there was none."""
        ...


class NewEvent(NamedTuple):
    """An event to append to a session's shared log: the transcript length when it
    happened, its type's name, and the event as JSON (`raven.engine.codec`)."""

    version: int
    kind: str
    body: str


@dataclass(frozen=True)
class LoggedRow:
    """One event of a session's shared log as stored, with the number the store gave it."""

    seq: int
    version: int
    body: str


@dataclass(frozen=True)
class InboxItem:
    """Something sent to the turn running in a session, from another process."""

    session_id: str
    kind: str
    text: str


class SharedSessions(Sessions, SharedTaskRows, Protocol):
    """A store several replicas share. Beside `Sessions`:

    - each session's event log, numbered by the store in one order for every replica;
      its epoch is the session's own, so a cursor holds on every replica;
    - claims are leases (`lease_s`), renewed by their holder and taken over once
      lapsed; a turn's events are appended only while its process holds the claim
      (`TurnLost` once it does not);
    - an inbox per session, for what other replicas send its running turn;
    - `watch` wakes a callback when a session's log or inbox changes (with `listening`;
      otherwise callers look every `poll_s`).
    """

    lease_s: float
    listening: bool
    poll_s: float

    async def create(
        self,
        cwd: str,
        face: str,
        mode: str | None = None,
        model: str | None = None,
        session_id: str | None = None,
        claimed: bool = False,
    ) -> SessionRecord:
        """`Sessions.create`; `claimed`: stored claimed for a turn of this process
        (`claim_turn`), which follows at once."""
        ...

    async def log_open(self, session_id: str) -> tuple[str, int, list[LoggedRow]]:
        """The session's log as kept: its epoch, its newest number, and its events from
        the oldest kept."""
        ...

    async def log_since(self, session_id: str, after: int) -> list[LoggedRow]:
        """The logged events after number `after`, in order (from the oldest kept)."""
        ...

    async def log_append(self, session_id: str, rows: list[NewEvent], fenced: bool) -> int:
        """Append `rows` in order; the number the first got. `fenced`: only while this
        process holds the session's claim (else `TurnLost`)."""
        ...

    async def end_turn(
        self, session_id: str, failure: str | None, logged: list[NewEvent]
    ) -> int | None:
        """`release_turn`, `logged` appended to the log in the same transaction (the turn's
        last events and its end); the number the first of them got, if any."""
        ...

    async def send(self, session_id: str, kind: str, text: str = "") -> bool:
        """Put `kind` in the inbox of the turn running in the session; False when no
        turn runs there."""
        ...

    async def take_inbox(self, session_ids: list[str]) -> list[InboxItem]:
        """What was sent to these sessions' turns, oldest first; taken (once)."""
        ...

    async def lapsed(self) -> list[str]:
        """Sessions whose claim has lapsed: its holder is gone or stopped renewing it."""
        ...

    async def watch(self, watcher: Watcher) -> None:
        """Tell `watcher` of every change from now until `aclose` (with `listening`)."""
        ...


class Watcher(Protocol):
    """Hears what other processes changed in a shared store."""

    def log_changed(self, session_id: str, head: int) -> None:
        """The session's log grew to the event numbered `head`."""

    def inbox_changed(self, session_id: str) -> None:
        """Something was sent to the turn running in the session."""

    def task_changed(self, task_id: str, version: int) -> None:
        """A task was written, to `version` (`raven.sessions.tasks`)."""

    def missed(self) -> None:
        """Changes may have gone unheard (listening began again after a lost connection)."""


def open_sessions(settings: SessionsConfig, paths: Paths) -> Sessions:
    """The store the config names: SQLite in the data directory, or PostgreSQL."""
    if settings.url is None:
        from raven.sessions.sqlite import SqliteSessions

        return SqliteSessions(paths.database)
    try:
        from raven.sessions.postgres import PostgresSessions
    except ImportError as exc:
        from raven.config import ConfigError

        raise ConfigError(
            f"sessions.url names PostgreSQL, which needs the postgresql extra "
            f"(pip install 'raven-agents[postgresql]'): {exc}"
        ) from exc
    store: SharedSessions = PostgresSessions(settings)
    return store
