"""Persistent sessions: records and transcripts in SQLite (WAL).

Owns `raven.db`. Methods are synchronous and thread-safe; async callers run them
through `asyncio.to_thread`. Knows nothing of turns, tools or faces.
"""

from raven.sessions.store import (
    BadCursor,
    SessionNotFound,
    SessionPage,
    SessionRecord,
    SessionStore,
)

__all__ = ["BadCursor", "SessionNotFound", "SessionPage", "SessionRecord", "SessionStore"]
