"""Persistent sessions: records and transcripts in SQLite (WAL).

Owns `raven.db`. Methods are synchronous and thread-safe; async callers run them
through `SessionStore.call`, on the store's own thread. Knows nothing of turns,
tools or faces.
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
