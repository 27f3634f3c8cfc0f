"""Schema changes for the PostgreSQL session store: named steps applied in order, recorded
in a table, under a lock so that replicas starting together apply each once.

Every table is named `raven_…`, so the store can share a database with other tables (the
A2A SDK's, which Raven's tasks were kept in before, are read once on upgrade).
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
    (
        "tasks_beside_the_sessions",
        """
        CREATE TABLE raven_tasks (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            context_id TEXT NOT NULL,
            state TEXT NOT NULL,
            updated_us BIGINT NOT NULL,
            version INTEGER NOT NULL,
            body BYTEA NOT NULL,
            holder TEXT,
            held_until DOUBLE PRECISION,
            pushes INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX raven_tasks_by_owner ON raven_tasks (owner, updated_us DESC, id DESC);
        CREATE INDEX raven_tasks_by_context
            ON raven_tasks (owner, context_id, updated_us DESC, id DESC);
        CREATE INDEX raven_tasks_by_state ON raven_tasks (owner, state, updated_us DESC, id DESC);
        CREATE INDEX raven_tasks_held ON raven_tasks (holder) WHERE holder IS NOT NULL;
        CREATE TABLE raven_task_events (
            task_id TEXT NOT NULL,
            version INTEGER NOT NULL,
            body BYTEA NOT NULL,
            PRIMARY KEY (task_id, version)
        );
        CREATE TABLE raven_task_counts (
            owner TEXT NOT NULL,
            context_id TEXT NOT NULL,
            state TEXT NOT NULL,
            n BIGINT NOT NULL,
            PRIMARY KEY (owner, context_id, state)
        );
        -- A task's configs may come before its first write (with its first message).
        CREATE TABLE raven_task_push_configs (
            task_id TEXT NOT NULL,
            config_id TEXT NOT NULL,
            owner TEXT NOT NULL,
            body BYTEA NOT NULL,
            delivery TEXT,
            added BIGSERIAL,
            PRIMARY KEY (task_id, config_id)
        );
        -- Each owner's and each context's count of tasks in each state; the rows are
        -- locked in one order (context, then state), so two writers never deadlock.
        CREATE FUNCTION raven_task_count() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO raven_task_counts AS c
            SELECT d.owner, d.context_id, d.state, sum(d.n) FROM (
                SELECT OLD.owner, '*', OLD.state, -1 WHERE TG_OP <> 'INSERT'
                UNION ALL SELECT OLD.owner, 'c:' || OLD.context_id, OLD.state, -1
                    WHERE TG_OP <> 'INSERT'
                UNION ALL SELECT NEW.owner, '*', NEW.state, 1 WHERE TG_OP <> 'DELETE'
                UNION ALL SELECT NEW.owner, 'c:' || NEW.context_id, NEW.state, 1
                    WHERE TG_OP <> 'DELETE'
            ) AS d (owner, context_id, state, n)
            GROUP BY d.owner, d.context_id, d.state
            ORDER BY d.context_id, d.state
            ON CONFLICT (owner, context_id, state) DO UPDATE SET n = c.n + excluded.n;
            RETURN NULL;
        END $$;
        CREATE TRIGGER raven_tasks_counted AFTER INSERT OR DELETE ON raven_tasks
            FOR EACH ROW EXECUTE FUNCTION raven_task_count();
        CREATE TRIGGER raven_tasks_recounted AFTER UPDATE OF state ON raven_tasks
            FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
            EXECUTE FUNCTION raven_task_count();
        -- Each task knows whether it has push configs, so that its writer, which reads
        -- the row anyway, knows whether to deliver the change.
        CREATE FUNCTION raven_task_pushes() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN
                UPDATE raven_tasks SET pushes = pushes + 1 WHERE id = NEW.task_id;
            ELSE
                UPDATE raven_tasks SET pushes = pushes - 1 WHERE id = OLD.task_id;
            END IF;
            RETURN NULL;
        END $$;
        CREATE TRIGGER raven_task_pushes_counted AFTER INSERT OR DELETE
            ON raven_task_push_configs FOR EACH ROW EXECUTE FUNCTION raven_task_pushes();
        """,
    ),
    (
        "forks_name_their_parent",
        """
        ALTER TABLE raven_sessions ADD COLUMN parent TEXT;
        """,
    ),
    (
        "ended_tasks_keep_their_events_a_while",
        """
        -- A task's end, so that its earlier events are let go a while later (followers
        -- on other replicas read them late under load), not by the write that ends it.
        CREATE TABLE raven_task_ends (
            task_id TEXT PRIMARY KEY,
            version INTEGER NOT NULL,
            at DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX raven_task_ends_by_time ON raven_task_ends (at);
        """,
    ),
    (
        "tasks_run_in_their_sessions_turns",
        """
        -- A task's runner (`holder`) runs it while it holds the claim of the session
        -- whose turns run it: the session's claim is the one lease.
        ALTER TABLE raven_tasks ADD COLUMN session_id TEXT;
        DROP INDEX raven_tasks_held;
        ALTER TABLE raven_tasks DROP COLUMN held_until;
        """,
    ),
    (
        "sessions_know_their_window",
        """
        -- The seq of the session's newest compaction (0: none): a live session reads
        -- only the window its model sees.
        ALTER TABLE raven_sessions ADD COLUMN compacted_at INTEGER NOT NULL DEFAULT 0;
        """,
    ),
]

NOW = "extract(epoch FROM clock_timestamp())"
"""The database's clock, in seconds: claims are judged by it, whatever the
replicas' clocks say."""
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
