"""Persistent sessions: records and transcripts, in SQLite (WAL) or PostgreSQL.

Owns `raven.db` and, when the config names one, the PostgreSQL tables of sessions.
Every store is a `Sessions` (`raven.sessions.store`); one that replicas share also keeps
each session's event log, its turn's claim as a lease and an inbox for its running turn.
Never blocks an event loop waiting for another process. Knows nothing of turns, tools
or faces.
"""

from raven.sessions.records import (
    MATCH_END,
    MATCH_START,
    AmbiguousSession,
    BadCursor,
    SearchHit,
    SessionNotFound,
    SessionPage,
    SessionRecord,
    StoreUnavailable,
    TurnElsewhere,
    TurnLost,
    Window,
    new_record,
)
from raven.sessions.sqlite import SqliteStore
from raven.sessions.store import (
    InboxItem,
    LoggedRow,
    NewEvent,
    Sessions,
    SharedSessions,
    Watcher,
    open_sessions,
)

__all__ = [
    "MATCH_END",
    "MATCH_START",
    "AmbiguousSession",
    "BadCursor",
    "InboxItem",
    "LoggedRow",
    "NewEvent",
    "SearchHit",
    "SessionNotFound",
    "SessionPage",
    "SessionRecord",
    "Sessions",
    "SharedSessions",
    "SqliteStore",
    "StoreUnavailable",
    "TurnElsewhere",
    "TurnLost",
    "Watcher",
    "Window",
    "new_record",
    "open_sessions",
]
