"""Schema changes for raven.db: small named functions applied in order, recorded in a table.

Also `index_pending`, which fills the word index the way the schema here defines it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime

from raven.sessions.records import INDEXED_CHARS


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


_KINDS_IN_2026 = {
    "read_file": "read",
    "list_dir": "read",
    "search": "read",
    "write_file": "edit",
    "edit_file": "edit",
    "run_command": "execute",
    "a2a_send": "fetch",
}
"""The built-in tools' kinds when tool calls began to be stored with their kind."""
_TITLE_ARGS_CHARS = 80


def _m002_tool_calls_keep_title_and_kind(db: sqlite3.Connection) -> None:
    """Give stored tool calls a title and kind: the built-ins' kinds, else "other"."""
    rows = db.execute(
        "SELECT session_id, seq, body FROM messages WHERE body LIKE '%\"tool_calls\"%'"
    ).fetchall()
    for session_id, seq, body in rows:
        message = json.loads(body)
        calls = message.get("tool_calls") or []
        if message.get("role") != "assistant" or not calls:
            continue
        for call in calls:
            call.setdefault("kind", _KINDS_IN_2026.get(call.get("name", ""), "other"))
            call.setdefault("title", _fallback_title(call))
        db.execute(
            "UPDATE messages SET body = ? WHERE session_id = ? AND seq = ?",
            (json.dumps(message, ensure_ascii=False), session_id, seq),
        )


def _fallback_title(call: dict[str, object]) -> str:
    args = call.get("raw_arguments") or json.dumps(call.get("arguments") or {}, ensure_ascii=False)
    text = f"{call.get('name', 'tool')} {args}"
    return text if len(text) <= _TITLE_ARGS_CHARS else text[: _TITLE_ARGS_CHARS - 1] + "…"


def _m003_turn_claims_and_versions(db: sqlite3.Connection) -> None:
    """`version` counts a session's messages as written; `turn_pid` is the process whose
    turn runs in it, so two processes never interleave turns in one session."""
    _run_script(
        db,
        """
        ALTER TABLE sessions ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE sessions ADD COLUMN turn_pid INTEGER;
        UPDATE sessions SET version =
            (SELECT COUNT(*) FROM messages WHERE messages.session_id = sessions.id)
        """,
    )


_SEARCHABLE_TEXT = f"""
    COALESCE(substr(json_extract(body, '$.text'), 1, {INDEXED_CHARS}), '') || ' ' ||
    COALESCE(substr(json_extract(body, '$.thought'), 1, {INDEXED_CHARS}), '') || ' ' ||
    COALESCE(substr(json_extract(body, '$.content'), 1, {INDEXED_CHARS}), '') || ' ' ||
    COALESCE(substr((SELECT group_concat(json_extract(value, '$.text'), ' ')
              FROM json_each(body, '$.parts')), 1, {INDEXED_CHARS}), '') || ' ' ||
    COALESCE(substr((SELECT group_concat(json_extract(value, '$.arguments'), ' ')
              FROM json_each(body, '$.tool_calls')), 1, {INDEXED_CHARS}), '')
"""


def _m004_full_text_search(db: sqlite3.Connection) -> None:
    """An FTS5 index of every message's words, filled from what is stored and kept in step
    by triggers, so every writer (any process) updates it in its own transaction."""
    text_of = _SEARCHABLE_TEXT.replace("body", "new.body")
    # One statement at a time: the trigger bodies hold semicolons of their own.
    db.execute("CREATE VIRTUAL TABLE messages_fts USING fts5(text, tokenize = 'unicode61')")
    db.execute(
        f"INSERT INTO messages_fts (rowid, text) SELECT rowid, {_SEARCHABLE_TEXT} FROM messages"
    )
    db.execute(
        "CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN "
        f"INSERT INTO messages_fts (rowid, text) VALUES (new.rowid, {text_of}); END"
    )
    db.execute(
        "CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN "
        "DELETE FROM messages_fts WHERE rowid = old.rowid; END"
    )


def _m005_index_words_off_the_write_path(db: sqlite3.Connection) -> None:
    """Writers only note which messages the index lacks (`messages_unindexed`); the index
    takes them in batches (`index_pending`), so a commit does not pay for FTS5's segment
    writes. Searching indexes what is pending first, so it never misses a message."""
    db.execute("DROP TRIGGER messages_fts_insert")
    db.execute("DROP TRIGGER messages_fts_delete")
    db.execute("CREATE TABLE messages_unindexed (message_rowid INTEGER PRIMARY KEY)")
    db.execute(
        "CREATE TRIGGER messages_unindexed_insert AFTER INSERT ON messages BEGIN "
        "INSERT INTO messages_unindexed VALUES (new.rowid); END"
    )
    db.execute(
        "CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN "
        "DELETE FROM messages_fts WHERE rowid = old.rowid; "
        "DELETE FROM messages_unindexed WHERE message_rowid = old.rowid; END"
    )


def _m006_sessions_keep_their_last_failure(db: sqlite3.Connection) -> None:
    """`failure` is the error the session's last turn ended with (NULL when it did not)."""
    db.execute("ALTER TABLE sessions ADD COLUMN failure TEXT")


def _m007_tasks_beside_the_sessions(db: sqlite3.Connection) -> None:
    """A face's tasks (`raven.sessions.sqlite_tasks`), their push configs, and the count of
    each owner's and each context's tasks in each state, kept by triggers."""
    _run_script(
        db,
        """
        CREATE TABLE tasks (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            context_id TEXT NOT NULL,
            state TEXT NOT NULL,
            updated_us INTEGER NOT NULL,
            version INTEGER NOT NULL,
            body BLOB NOT NULL,
            holder INTEGER,
            pushes INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX tasks_by_owner ON tasks (owner, updated_us DESC, id DESC);
        CREATE INDEX tasks_by_context ON tasks (owner, context_id, updated_us DESC, id DESC);
        CREATE INDEX tasks_by_state ON tasks (owner, state, updated_us DESC, id DESC);
        CREATE TABLE task_counts (
            owner TEXT NOT NULL,
            context_id TEXT NOT NULL,
            state TEXT NOT NULL,
            n INTEGER NOT NULL,
            PRIMARY KEY (owner, context_id, state)
        ) WITHOUT ROWID;
        CREATE TABLE task_push_configs (
            task_id TEXT NOT NULL,
            config_id TEXT NOT NULL,
            owner TEXT NOT NULL,
            body BLOB NOT NULL,
            delivery TEXT,
            PRIMARY KEY (task_id, config_id)
        )
        """,
    )
    count = (
        "INSERT INTO task_counts VALUES ({r}.owner, '*', {r}.state, {n}), "
        "({r}.owner, 'c:' || {r}.context_id, {r}.state, {n}) "
        "ON CONFLICT (owner, context_id, state) DO UPDATE SET n = n + excluded.n; "
    )
    added, taken = count.format(r="new", n=1), count.format(r="old", n=-1)
    db.execute(f"CREATE TRIGGER tasks_counted AFTER INSERT ON tasks BEGIN {added} END")
    db.execute(f"CREATE TRIGGER tasks_uncounted AFTER DELETE ON tasks BEGIN {taken} END")
    db.execute(
        "CREATE TRIGGER tasks_recounted AFTER UPDATE OF state ON tasks "
        f"WHEN old.state <> new.state BEGIN {taken} {added} END"
    )
    for event, row, n in (("INSERT", "new", "+ 1"), ("DELETE", "old", "- 1")):
        db.execute(
            f"CREATE TRIGGER task_pushes_{event.lower()} AFTER {event} ON task_push_configs "
            f"BEGIN UPDATE tasks SET pushes = pushes {n} WHERE id = {row}.task_id; END"
        )


def index_pending(db: sqlite3.Connection) -> None:
    """Add the messages written since the last call to the word index (inside a write):
    with the text their writer noted, or (copied by a fork, written before migration 9)
    taken from their JSON."""
    db.execute(  # a long body is a blob: cast, JSON functions read it as text on any SQLite
        "INSERT INTO messages_fts (rowid, text) SELECT messages.rowid, "
        f"COALESCE(messages_unindexed.text, {_SEARCHABLE_TEXT}) FROM messages_unindexed "
        "JOIN (SELECT rowid, CAST(body AS TEXT) AS body FROM messages) AS messages "
        "ON messages.rowid = messages_unindexed.message_rowid"
    )
    db.execute("DELETE FROM messages_unindexed")


def _run_script(db: sqlite3.Connection, script: str) -> None:
    # executescript() would commit the surrounding transaction; run statements one by one.
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


def _m008_forks_name_their_parent(db: sqlite3.Connection) -> None:
    """`parent` is the session a session was forked from (NULL for one started afresh)."""
    db.execute("ALTER TABLE sessions ADD COLUMN parent TEXT")


def _m009_pending_words_come_with_their_text(db: sqlite3.Connection) -> None:
    """A writer notes the text the index takes of its message (`searchable_text`), so
    indexing never parses a message's JSON: a long answer's body parsed in SQL for each
    of its parts held about nine copies of it at once."""
    db.execute("ALTER TABLE messages_unindexed ADD COLUMN text TEXT")
    db.execute("DROP TRIGGER messages_unindexed_insert")
    db.execute(
        "CREATE TRIGGER messages_unindexed_insert AFTER INSERT ON messages BEGIN "
        "INSERT INTO messages_unindexed (message_rowid) VALUES (new.rowid); END"
    )


def _m010_tasks_run_in_their_sessions_turns(db: sqlite3.Connection) -> None:
    """`session_id` is the session whose turns run the task: its runner (`holder`) runs
    it while it holds that session's claim."""
    db.execute("ALTER TABLE tasks ADD COLUMN session_id TEXT")


def _m011_sessions_know_their_window(db: sqlite3.Connection) -> None:
    """`compacted_at` is the seq of the session's newest compaction (0: none), so a live
    session reads only the window its model sees (`raven.messages.CompactionMessage`)."""
    db.execute("ALTER TABLE sessions ADD COLUMN compacted_at INTEGER NOT NULL DEFAULT 0")


def _m012_long_bodies_are_written_in_pieces(db: sqlite3.Connection) -> None:
    """A message's body is the last column of its row, so a long one is stored as a
    zeroblob written a piece at a time (`raven.sessions.bodies`): SQLite writes out a
    zeroblob only when it ends the row. The table is rebuilt (once; a large store takes a
    moment), keeping each message's rowid, which the word index refers to."""
    _run_script(
        db,
        """
        DROP TRIGGER messages_fts_delete;
        DROP TRIGGER messages_unindexed_insert;
        CREATE TABLE messages_rebuilt (
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            created_at TEXT NOT NULL,
            body TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        );
        INSERT INTO messages_rebuilt (rowid, session_id, seq, created_at, body)
            SELECT rowid, session_id, seq, created_at, body FROM messages ORDER BY rowid;
        DROP TABLE messages;
        ALTER TABLE messages_rebuilt RENAME TO messages
        """,
    )
    db.execute(
        "CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN "
        "DELETE FROM messages_fts WHERE rowid = old.rowid; "
        "DELETE FROM messages_unindexed WHERE message_rowid = old.rowid; END"
    )
    db.execute(
        "CREATE TRIGGER messages_unindexed_insert AFTER INSERT ON messages BEGIN "
        "INSERT INTO messages_unindexed (message_rowid) VALUES (new.rowid); END"
    )


MIGRATIONS: list[tuple[str, Callable[[sqlite3.Connection], None]]] = [
    ("sessions_and_messages", _m001_sessions_and_messages),
    ("tool_calls_keep_title_and_kind", _m002_tool_calls_keep_title_and_kind),
    ("turn_claims_and_versions", _m003_turn_claims_and_versions),
    ("full_text_search", _m004_full_text_search),
    ("index_words_off_the_write_path", _m005_index_words_off_the_write_path),
    ("sessions_keep_their_last_failure", _m006_sessions_keep_their_last_failure),
    ("tasks_beside_the_sessions", _m007_tasks_beside_the_sessions),
    ("forks_name_their_parent", _m008_forks_name_their_parent),
    ("pending_words_come_with_their_text", _m009_pending_words_come_with_their_text),
    ("tasks_run_in_their_sessions_turns", _m010_tasks_run_in_their_sessions_turns),
    ("sessions_know_their_window", _m011_sessions_know_their_window),
    ("long_bodies_are_written_in_pieces", _m012_long_bodies_are_written_in_pieces),
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
