"""Schema changes for the PostgreSQL session store: named steps applied in order, recorded
in a table, under a lock so that replicas starting together apply each once.

Every table is named `raven_…`, so the store can share a database with the A2A task
store.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

MIGRATIONS: list[tuple[str, str]] = [
    (
        "sessions_messages_and_words",
        """
        CREATE TABLE raven_sessions (
            id TEXT PRIMARY KEY,
            cwd TEXT NOT NULL,
            title TEXT NOT NULL DEFAULT '',
            mode TEXT,
            model TEXT,
            face TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            closed BOOLEAN NOT NULL DEFAULT false,
            failure TEXT,
            version INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX raven_sessions_by_update ON raven_sessions (updated_at DESC, id DESC);
        CREATE INDEX raven_sessions_by_cwd ON raven_sessions (cwd, updated_at DESC);
        CREATE TABLE raven_messages (
            session_id TEXT NOT NULL REFERENCES raven_sessions (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            body TEXT NOT NULL,
            created_at TEXT NOT NULL,
            search_text TEXT NOT NULL,
            words TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', search_text)) STORED,
            PRIMARY KEY (session_id, seq)
        );
        CREATE INDEX raven_messages_words ON raven_messages USING GIN (words);
        """,
    ),
    (
        "claims_logs_and_inboxes",
        """
        ALTER TABLE raven_sessions ADD COLUMN turn_holder TEXT;
        ALTER TABLE raven_sessions ADD COLUMN turn_until DOUBLE PRECISION;
        ALTER TABLE raven_sessions ADD COLUMN log_epoch TEXT NOT NULL
            DEFAULT substr(md5(random()::text), 1, 8);
        ALTER TABLE raven_sessions ADD COLUMN log_seq BIGINT NOT NULL DEFAULT 0;
        CREATE INDEX raven_sessions_claimed ON raven_sessions (id) WHERE turn_holder IS NOT NULL;
        CREATE TABLE raven_session_events (
            session_id TEXT NOT NULL REFERENCES raven_sessions (id) ON DELETE CASCADE,
            seq BIGINT NOT NULL,
            version INTEGER NOT NULL,
            kind TEXT NOT NULL,
            body TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        );
        CREATE TABLE raven_session_inbox (
            id BIGSERIAL PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES raven_sessions (id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            text TEXT NOT NULL
        );
        CREATE INDEX raven_session_inbox_by_session ON raven_session_inbox (session_id);
        """,
    ),
]

_LOCK = 0x7261_7665_6E00  # "raven\0": one advisory lock for every replica's migrations


async def migrate(conn: Any) -> None:
    """Apply every migration not yet recorded, each in its own transaction."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS raven_schema_migrations "
            "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
    for version, (name, script) in enumerate(MIGRATIONS, start=1):
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK)
            done = await conn.fetchval(
                "SELECT 1 FROM raven_schema_migrations WHERE version = $1", version
            )
            if not done:
                await conn.execute(script)
                await conn.execute(
                    "INSERT INTO raven_schema_migrations VALUES ($1, $2, $3)",
                    version,
                    name,
                    datetime.now(UTC).isoformat(),
                )
