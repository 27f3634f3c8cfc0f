"""Schema changes for raven.db: small named functions applied in order, recorded in a table."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime


def _m001_sessions_and_messages(db: sqlite3.Connection) -> None:
    _run_script(
        db,
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            cwd TEXT NOT NULL,
            title TEXT NOT NULL DEFAULT '',
            mode TEXT,
            model TEXT,
            face TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            closed INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX sessions_by_update ON sessions (updated_at DESC, id DESC);
        CREATE INDEX sessions_by_cwd ON sessions (cwd, updated_at DESC);
        CREATE TABLE messages (
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            body TEXT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        );
        """,
    )


def _run_script(db: sqlite3.Connection, script: str) -> None:
    # executescript() would commit the surrounding transaction; run statements one by one.
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


MIGRATIONS: list[tuple[str, Callable[[sqlite3.Connection], None]]] = [
    ("sessions_and_messages", _m001_sessions_and_messages),
]


def migrate(db: sqlite3.Connection) -> None:
    """Apply every migration not yet recorded, each in its own transaction."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations "
        "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )
    for version, (name, apply) in enumerate(MIGRATIONS, start=1):
        db.execute("BEGIN IMMEDIATE")
        try:
            done = db.execute(
                "SELECT 1 FROM schema_migrations WHERE version = ?", (version,)
            ).fetchone()
            if not done:
                apply(db)
                db.execute(
                    "INSERT INTO schema_migrations VALUES (?, ?, ?)",
                    (version, name, datetime.now(UTC).isoformat()),
                )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
