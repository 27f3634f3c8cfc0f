"""What only the SQLite store does: its file, its processes and its thread, its migrations.
What every store does is in test_contract.py."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from raven.messages import AssistantMessage, ToolResultMessage, user_text
from raven.sessions import SessionNotFound, SqliteStore, new_record
from raven.sessions.bodies import LONG_BODY_CHARS
from raven.sessions.sqlite import CHECKPOINT_EVERY


async def upkeep_done(store: SqliteStore) -> None:
    """Until the store's threads have done the upkeep due (word index and WAL checkpoint)."""
    async with asyncio.timeout(10):
        while (
            store._commits >= CHECKPOINT_EVERY
            or not store._worker.idle
            or not store._checkpointer.idle
        ):
            await asyncio.sleep(0.01)


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    s = SqliteStore(tmp_path / "raven.db")
    yield s  # type: ignore[misc]
    s.close()


def test_migrations_apply_once(tmp_path: Path) -> None:
    SqliteStore(tmp_path / "raven.db").close()
    again = SqliteStore(tmp_path / "raven.db")
    rows = again._db.execute("SELECT version, name FROM schema_migrations").fetchall()
    again.close()
    assert [name for _, name in rows] == [
        "sessions_and_messages",
        "tool_calls_keep_title_and_kind",
        "turn_claims_and_versions",
        "full_text_search",
        "index_words_off_the_write_path",
        "sessions_keep_their_last_failure",
        "tasks_beside_the_sessions",
        "forks_name_their_parent",
        "pending_words_come_with_their_text",
        "tasks_run_in_their_sessions_turns",
        "sessions_know_their_window",
        "long_bodies_are_written_in_pieces",
    ]


def test_a_turns_failure_is_kept_until_the_next_turn_ends_and_never_over_anothers_claim(
    store: SqliteStore,
) -> None:
    record = store.create("/w", "test")
    store.claim_turn(record.id, 1)
    store.release_turn(record.id, 1, "the model server is down")
    assert store.get(record.id).failure == "the model server is down"
    assert store.page().sessions[0].failure == "the model server is down"
    store.claim_turn(record.id, os.getpid())
    store.release_turn(record.id, 1, None)  # not the holder: changes nothing
    assert store.get(record.id).failure == "the model server is down"
    store.release_turn(record.id, os.getpid(), None)
    assert store.get(record.id).failure is None


_WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from raven.messages import user_text
    from raven.sessions import SqliteStore
    store = SqliteStore(Path(sys.argv[1]))
    for i in range(int(sys.argv[3])):
        store.append(sys.argv[2], user_text(f"{sys.argv[4]}-{i}"))
        if len(sys.argv) > 5:
            print(i, flush=True)
""")


def test_two_writer_processes_corrupt_nothing(tmp_path: Path) -> None:
    db = tmp_path / "raven.db"
    store = SqliteStore(db)
    rec = store.create("/w", face="cli")
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(db), rec.id, "150", tag])
        for tag in ("p1", "p2")
    ]
    assert [p.wait(120) for p in procs] == [0, 0]
    texts = [m.text for m in store.messages(rec.id)]  # type: ignore[union-attr]
    assert len(texts) == 300
    for tag in ("p1", "p2"):
        assert [t for t in texts if t.startswith(tag)] == [f"{tag}-{i}" for i in range(150)]
    assert store._db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    store.close()


def test_sigkill_mid_write_keeps_committed_messages(tmp_path: Path) -> None:
    db = tmp_path / "raven.db"
    store = SqliteStore(db)
    rec = store.create("/w", face="cli")
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(db), rec.id, "100000", "k", "report"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    reported = -1
    while reported < 50 and time.monotonic() < deadline:
        reported = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    proc.stdout.close()
    texts = [m.text for m in store.messages(rec.id)]  # type: ignore[union-attr]
    assert len(texts) >= reported + 1
    assert texts == [f"k-{i}" for i in range(len(texts))]
    assert store._db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    store.close()


def test_the_store_is_the_users_alone(tmp_path: Path) -> None:
    path = tmp_path / "data" / "raven.db"
    store = SqliteStore(path)
    record = store.create(str(tmp_path), face="test", model="m")
    store.append(record.id, user_text("hello"))
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in path.parent.iterdir()}
    store.close()
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert modes["raven.db"] == 0o600 and modes.get("raven.db-wal", 0o600) == 0o600


def test_an_existing_store_others_could_read_is_narrowed(tmp_path: Path) -> None:
    path = tmp_path / "raven.db"
    SqliteStore(path).close()
    path.chmod(0o644)
    SqliteStore(path).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_migration_gives_old_tool_calls_a_title_and_kind(tmp_path: Path) -> None:
    import json
    import sqlite3

    path = tmp_path / "raven.db"
    store = SqliteStore(path)
    record = store.create(str(tmp_path), face="test", model="m")
    old_body = {
        "role": "assistant",
        "text": "",
        "thought": "",
        "tool_calls": [
            {"id": "a", "name": "read_file", "arguments": {"path": "x"}},
            {"id": "b", "name": "notes__add", "arguments": {"text": "y"}},
        ],
    }
    store.close()
    db = sqlite3.connect(path)
    db.execute(
        "INSERT INTO messages (session_id, seq, body, created_at) "
        "VALUES (?, 1, ?, '2026-01-01T00:00:00Z')",
        (record.id, json.dumps(old_body)),
    )
    db.execute("DELETE FROM schema_migrations WHERE version = 2")
    db.commit()
    db.close()
    reopened = SqliteStore(path)
    (message,) = reopened.messages(record.id)
    reopened.close()
    assert isinstance(message, AssistantMessage)
    first, second = message.tool_calls
    assert (first.kind, second.kind) == ("read", "other")
    assert first.title == 'read_file {"path": "x"}' and second.title.startswith("notes__add")


def test_search_finds_words_in_tool_results_and_in_sessions_older_than_the_index(
    tmp_path: Path,
) -> None:
    import sqlite3

    path = tmp_path / "raven.db"
    store = SqliteStore(path)
    old = store.create(str(tmp_path), face="test", model="m")
    store.append(old.id, user_text("remember the marigolds"))
    store.close()
    db = sqlite3.connect(path)  # as a store from before full-text search
    db.execute("DROP TRIGGER messages_unindexed_insert")
    db.execute("DROP TRIGGER messages_fts_delete")
    db.execute("DROP TABLE messages_unindexed")
    db.execute("DROP TABLE messages_fts")
    db.execute("DELETE FROM schema_migrations WHERE version IN (4, 5, 9)")
    db.commit()
    db.close()
    store = SqliteStore(path)
    new = store.create(str(tmp_path), face="test", model="m")
    store.append(new.id, user_text("read the log"))
    store.append(
        new.id,
        ToolResultMessage(call_id="c", name="read_file", content="ERROR the disk of petunias"),
    )
    assert [h.record.id for h in store.search("marigolds")] == [old.id]
    (hit,) = store.search("petunias disk")
    assert hit.record.id == new.id and "\x02petunias\x03" in hit.snippet
    assert store.search("petunias", cwd="/elsewhere") == []
    assert store.search('"); DROP TABLE x; --') == []
    store.delete(new.id)
    assert store.search("petunias") == []
    store.close()


async def test_small_writes_commit_on_the_loop_without_a_thread_hop(store: SqliteStore) -> None:
    import threading

    rec = store.create("/w", face="cli")
    threads: list[int] = []
    real = store.append

    def append(*args, **kwargs):  # type: ignore[no-untyped-def]
        threads.append(threading.get_ident())
        return real(*args, **kwargs)

    append.__name__ = "append"
    await store.call(append, rec.id, user_text("hello"))
    assert threads == [threading.get_ident()]
    other = SqliteStore(Path(store._db.execute("PRAGMA database_list").fetchone()[2]))
    try:
        assert [m.text for m in other.messages(rec.id)] == ["hello"]  # type: ignore[union-attr]
    finally:
        other.close()


async def test_another_process_writing_never_blocks_the_loop(tmp_path: Path) -> None:
    import sqlite3

    store = SqliteStore(tmp_path / "raven.db")
    rec = store.create("/w", face="cli")
    holder = sqlite3.connect(tmp_path / "raven.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's write transaction
    write = asyncio.create_task(store.call(store.append, rec.id, user_text("waited")))
    ticks = 0
    while ticks < 20:  # the loop keeps turning while the write waits for the lock
        await asyncio.sleep(0.005)
        ticks += 1
    assert not write.done()
    holder.execute("COMMIT")
    async with asyncio.timeout(10):
        await write
    assert [m.text for m in store.messages(rec.id)] == ["waited"]  # type: ignore[union-attr]
    holder.close()
    store.close()


async def test_the_store_thread_waits_for_another_process_after_writes_on_the_loop(
    tmp_path: Path,
) -> None:
    """A write on the loop never waits for another process's lock; the store's thread,
    which runs the rest, still does."""
    import sqlite3
    import threading

    store = SqliteStore(tmp_path / "raven.db")
    rec = store.create("/w", face="cli")
    await store.call(store.append, rec.id, user_text("written on the loop"))
    began = threading.Event()
    loop_thread = threading.get_ident()
    store._db.set_trace_callback(
        lambda sql: began.set() if threading.get_ident() != loop_thread else None
    )
    holder = sqlite3.connect(tmp_path / "raven.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's write transaction
    deleting = asyncio.create_task(store.call(store.delete, rec.id))  # the store's thread
    assert await asyncio.to_thread(began.wait, 10)
    holder.execute("COMMIT")
    async with asyncio.timeout(10):
        assert await deleting
    holder.close()
    store.close()


def _texts(store: SqliteStore, session_id: str) -> list[str]:
    return [m.text for m in store.messages(session_id)]  # type: ignore[union-attr]


async def test_a_staged_write_commits_with_the_next_one_or_as_the_loop_moves_on(
    tmp_path: Path,
) -> None:
    """A turn's prompt, staged, is committed together with the turn's next write when that
    comes at once (one transaction), or else before any task woken after it runs."""
    store = SqliteStore(tmp_path / "raven.db")
    other = SqliteStore(tmp_path / "raven.db")  # what another process sees
    record = new_record("/w", "test", None, None)
    await store.stage(store.append, record.id, user_text("asked"), None, record)
    with pytest.raises(SessionNotFound):
        other.messages(record.id)  # not committed yet: the answer may join it
    await store.call(store.append, record.id, AssistantMessage(text="answered"))
    assert _texts(other, record.id) == ["asked", "answered"]

    await store.stage(store.append, record.id, user_text("asked again"))
    await asyncio.sleep(0)  # the loop's next step: no write joined it
    assert _texts(other, record.id)[-1] == "asked again"
    other.close()
    store.close()


async def test_a_write_that_fails_beside_a_staged_one_leaves_it_committed(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "raven.db")
    record = new_record("/w", "test", None, None)
    await store.stage(store.append, record.id, user_text("kept"), None, record)
    with pytest.raises(SessionNotFound):
        await store.call(store.append, "ses_missing", user_text("nowhere"))
    store.close()
    again = SqliteStore(tmp_path / "raven.db")
    assert _texts(again, record.id) == ["kept"]
    again.close()


async def test_another_process_writes_after_a_staged_write_and_closing_commits_one(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "raven.db")
    other = SqliteStore(tmp_path / "raven.db")
    record = new_record("/w", "test", None, None)
    await store.stage(store.append, record.id, user_text("first"), None, record)
    # The other process waits for the write lock (its busy timeout) while the loop goes on.
    await asyncio.to_thread(other.append, record.id, user_text("second"))
    assert _texts(other, record.id) == ["first", "second"]
    await store.stage(store.append, record.id, user_text("third"))
    store.close()  # in the same step: the staged write is committed first
    assert _texts(other, record.id) == ["first", "second", "third"]
    other.close()


async def test_the_write_ahead_log_is_checkpointed_off_the_loop(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "raven.db")
    rec = store.create("/w", face="cli")
    wal = tmp_path / "raven.db-wal"
    for i in range(CHECKPOINT_EVERY):
        await store.call(store.append, rec.id, user_text(f"message {i} " + "x" * 2000))
    await upkeep_done(store)  # the store's thread checkpoints; the next writer rewinds
    size = wal.stat().st_size
    for batch in range(4):  # each checkpoint done before the next batch, however loaded
        for i in range(CHECKPOINT_EVERY):
            await store.call(store.append, rec.id, user_text(f"more {batch} {i} " + "x" * 2000))
        await upkeep_done(store)
    assert wal.stat().st_size <= 2 * size  # reused from its start, not grown 5-fold
    assert len(store.messages(rec.id)) == 5 * CHECKPOINT_EVERY
    store.close()


async def test_writes_go_on_while_the_log_is_checkpointed(tmp_path: Path) -> None:
    """A checkpoint flushes the disk for 10 ms and more: writes do not wait for it."""
    import sqlite3
    import threading

    store = SqliteStore(tmp_path / "raven.db")
    rec = store.create("/w", face="cli")
    flushing, done = threading.Event(), threading.Event()
    slow = sqlite3.connect(tmp_path / "raven.db", isolation_level=None, check_same_thread=False)

    def flush() -> int:  # the checkpoint's progress, held until the writes below are in
        flushing.set()
        done.wait(10)
        return 0

    slow.set_progress_handler(flush, 1)
    store._checkpoints = slow  # the connection checkpoints run on
    try:
        for i in range(3 * CHECKPOINT_EVERY):
            async with asyncio.timeout(10):
                await store.call(store.append, rec.id, user_text(f"message {i}"))
        assert flushing.is_set()  # a checkpoint was under way meanwhile
        assert len(store.messages(rec.id)) == 3 * CHECKPOINT_EVERY
    finally:
        done.set()
        store.close()


async def test_search_finds_every_message_while_the_index_catches_up_off_the_loop(
    tmp_path: Path,
) -> None:
    import sqlite3

    path = tmp_path / "raven.db"
    store = SqliteStore(path)
    rec = store.create("/w", face="cli")
    gone = store.create("/w", face="cli")
    await store.call(store.append, gone.id, user_text("zinnias in the window"))
    await store.call(store.delete, gone.id)
    for i in range(CHECKPOINT_EVERY):
        await store.call(store.append, rec.id, user_text(f"note about tulip{i}"))
    await upkeep_done(store)  # the store's thread indexes them with its checkpoint
    (unindexed,) = store._db.execute("SELECT COUNT(*) FROM messages_unindexed").fetchone()
    assert unindexed <= store._commits  # only what was committed after the upkeep
    other = SqliteStore(path)  # another process's writer: indexes what it wrote as it closes
    other.append(rec.id, user_text("asters by the fence"))
    other.close()
    assert store._db.execute("SELECT COUNT(*) FROM messages_unindexed").fetchone() == (0,)
    assert [hit.record.id for hit in store.search("asters")] == [rec.id]
    store._db.execute(  # as a writer that crashed before indexing: found all the same
        "INSERT INTO messages (session_id, seq, body, created_at) "
        'VALUES (?, 999, \'{"role": "user", "text": "hollyhocks"}\', \'\')',
        (rec.id,),
    )
    assert [hit.record.id for hit in store.search("hollyhocks")] == [rec.id]
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another process writing: nothing to index, no wait
    store._db.execute("PRAGMA busy_timeout = 100")
    assert [hit.record.id for hit in store.search("tulip7")] == [rec.id]
    blocker.execute("ROLLBACK")
    blocker.close()
    assert store.search("zinnias") == []
    store.close()


def test_a_long_answer_is_written_in_pieces_and_read_back_forked_and_found_whole(
    store: SqliteStore,
) -> None:
    text = "begonias\n" + 'a "quoted" é line\x01 with ünïcode 🌱\n' * 60_000
    assert len(text) >= LONG_BODY_CHARS
    record = store.create("/w", face="test")
    store.append(record.id, user_text("tell me everything"))
    store.append(record.id, AssistantMessage(text=text, thought="dahlias"))
    (kind,) = store._db.execute(
        "SELECT typeof(body) FROM messages WHERE session_id = ? AND seq = 2", (record.id,)
    ).fetchone()
    assert kind == "blob"  # the zeroblob the pieces were written into
    _, answer = store.messages(record.id)
    assert isinstance(answer, AssistantMessage)
    assert answer.text == text and answer.thought == "dahlias"
    fork = store.fork(record.id, "/w", face="test")
    assert store.messages(fork.id)[1] == answer
    # a fork's copies are indexed from their JSON, the blob read as text
    assert {hit.record.id for hit in store.search("begonias")} == {record.id, fork.id}
    store.delete(record.id)
    assert [hit.record.id for hit in store.search("dahlias")] == [fork.id]


def test_an_older_store_keeps_its_messages_and_their_index_when_the_table_is_rebuilt(
    tmp_path: Path,
) -> None:
    import sqlite3
    from datetime import UTC, datetime

    from raven.sessions.migrations import MIGRATIONS

    path = tmp_path / "raven.db"
    db = sqlite3.connect(path, isolation_level=None)  # as Raven left it before migration 12
    db.execute("PRAGMA foreign_keys = ON")
    db.execute(
        "CREATE TABLE schema_migrations "
        "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )
    for version, (name, apply) in enumerate(MIGRATIONS[:11], start=1):
        apply(db)
        db.execute(
            "INSERT INTO schema_migrations VALUES (?, ?, ?)",
            (version, name, datetime.now(UTC).isoformat()),
        )
    record = new_record("/w", "test", None, None)
    db.execute(
        "INSERT INTO sessions (id, cwd, face, created_at, updated_at, version) "
        "VALUES (?, '/w', 'test', '2026-01-01', '2026-01-01', 3)",
        (record.id,),
    )
    for seq, words in enumerate(("first tulips", "then lilies", "last irises"), start=1):
        body = f'{{"role":"user","parts":[{{"type":"text","text":"{words}"}}]}}'
        db.execute(
            "INSERT INTO messages (session_id, seq, body, created_at) VALUES (?, ?, ?, '')",
            (record.id, seq, body),
        )
        db.execute(
            "UPDATE messages_unindexed SET text = ? WHERE message_rowid = last_insert_rowid()",
            (words,),
        )
    db.execute("DELETE FROM messages WHERE seq = 2")  # rowids with a gap, as deletes leave
    db.execute(
        "INSERT INTO messages_fts (rowid, text) SELECT message_rowid, text FROM messages_unindexed"
    )
    db.execute("DELETE FROM messages_unindexed")
    db.close()
    store = SqliteStore(path)
    assert [m.parts[0].text for m in store.messages(record.id)] == [  # type: ignore[union-attr]
        "first tulips",
        "last irises",
    ]
    assert [hit.record.id for hit in store.search("irises")] == [record.id]
    store.append(record.id, user_text("and roses"))
    assert len(store.messages(record.id)) == 3
    assert [hit.record.id for hit in store.search("roses")] == [record.id]
    store.delete(record.id)
    assert store.search("tulips") == [] and store.search("irises") == []
    store.close()
