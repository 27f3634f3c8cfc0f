"""Persistent sessions: records and transcripts in SQLite (WAL).

Owns `raven.db`. Methods are synchronous and thread-safe; async callers run them
through `SessionStore.call`: small writes right away when the database is free,
everything else on the store's own thread. Never blocks an event loop waiting for
another process. Knows nothing of turns, tools or faces.
"""

from raven.sessions.store import (
    AmbiguousSession,
    BadCursor,
    SearchHit,
    SessionNotFound,
    SessionPage,
    SessionRecord,
    SessionStore,
    StoreUnavailable,
    TurnElsewhere,
    new_record,
)

__all__ = [
    "AmbiguousSession",
    "BadCursor",
    "SearchHit",
    "SessionNotFound",
    "SessionPage",
    "SessionRecord",
    "SessionStore",
    "StoreUnavailable",
    "TurnElsewhere",
    "new_record",
]
